package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/scheduler/ganeti"
)

func TestRunSqueezePlain(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts squeezeOptions
		want string
	}{
		{"offline", squeezeOptions{file: ganetiTestdata + "hsqueeze-underutilized.data", minimal: 2, target: 2},
			"'Nodes to offline'\nnode-01-004\nnode-01-005\n"},
		{"online", squeezeOptions{file: ganetiTestdata + "hsqueeze-overutilized.data", minimal: 2, target: 2},
			"'Nodes to online'\nnode-01-002\nnode-01-004\n"},
		{"none", squeezeOptions{file: ganetiTestdata + "hsqueeze-underutilized.data", minimal: 2, target: 3},
			"'No action'\n"},
		{"no headers", squeezeOptions{file: ganetiTestdata + "hsqueeze-underutilized.data", minimal: 2, target: 1, noHeaders: true},
			"node-01-003\nnode-01-004\nnode-01-005\n"},
		{"not enough, verbose", squeezeOptions{file: ganetiTestdata + "hsqueeze-overutilized.data", minimal: 4, target: 5, verbose: 2},
			"Offline candidates: node-01-001\nOnline candidates: node-01-002,node-01-004,node-01-005,node-01-006\n" +
				"'Nodes to online'\nnode-01-002\nnode-01-004\nnode-01-005\nnode-01-006\nOnlining all nodes will not yield enough capacity\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, out := testGlobals()
			require.NoError(t, runSqueeze(t.Context(), g, tc.opts))
			require.Equal(t, tc.want, out.String())
		})
	}
}

func TestRunSqueezeCommands(t *testing.T) {
	g, out := testGlobals()
	opts := squeezeOptions{file: ganetiTestdata + "hsqueeze-underutilized.data", minimal: 2, target: 2, commands: true}
	require.NoError(t, runSqueeze(t.Context(), g, opts))
	// Byte for byte what hsqueeze -C prints for this cluster.
	require.Equal(t, `'Nodes to offline'
node-01-004
node-01-005

Commands to run:
  
  echo jobset 1, 2 jobs
    echo job 1/1
    gnt-instance migrate -f -n node-01-002 inst-40
    echo job 1/2
    gnt-instance migrate -f -n node-01-003 inst-50
  
  echo Tagging Commands
    gnt-node add-tags node-01-004 htools:standby:auto
    gnt-node add-tags node-01-005 htools:standby:auto
  
  echo Power Commands
    gnt-node power -f off node-01-004
    gnt-node power -f off node-01-005
`, out.String())
}

func TestRunSqueezeJSON(t *testing.T) {
	g, out := testGlobals()
	opts := squeezeOptions{file: ganetiTestdata + "hsqueeze-overutilized.data", minimal: 2, target: 2, json: true}
	require.NoError(t, runSqueeze(t.Context(), g, opts))
	var res map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	for _, k := range []string{"action", "nodes", "moves", "commands", "score_before", "score_after"} {
		require.Contains(t, res, k)
	}
	require.Len(t, res, 6)
	var action string
	var nodes []string
	var moves []map[string]string
	require.NoError(t, json.Unmarshal(res["action"], &action))
	require.NoError(t, json.Unmarshal(res["nodes"], &nodes))
	require.NoError(t, json.Unmarshal(res["moves"], &moves))
	require.Equal(t, "online", action)
	require.Equal(t, []string{"node-01-002", "node-01-004"}, nodes)
	require.Len(t, moves, 4)
	require.Equal(t, map[string]string{"instance": "inst-00", "from": "node-01-000", "to": "node-01-002", "kind": "migrate"}, moves[0])
}

func TestRunSqueezeUsage(t *testing.T) {
	g, _ := testGlobals()
	err := runSqueeze(t.Context(), g, squeezeOptions{file: ganetiTestdata + "hsqueeze-overutilized.data", drbd: true, all: true, minimal: 2, target: 2})
	require.ErrorAs(t, err, new(usageError))
	err = runSqueeze(t.Context(), g, squeezeOptions{file: ganetiTestdata + "hsqueeze-overutilized.data", minimal: -1, target: 2})
	require.ErrorAs(t, err, new(usageError))
	require.Equal(t, 2, exitCode(t.Context(), err))
}

func TestRunSqueezeSearchAndJSONInput(t *testing.T) {
	// The same cluster as JSON (what ganeti.WriteJSON writes) gives the same
	// decision, with every search strategy.
	c, err := readCluster(ganetiTestdata + "hsqueeze-underutilized.data")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "cluster.json")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, ganeti.WriteJSON(f, c))
	require.NoError(t, f.Close())
	for _, search := range []string{"auto", "exact", "bounded", "pruned", "incremental"} {
		g, out := testGlobals()
		require.NoError(t, runSqueeze(t.Context(), g, squeezeOptions{file: path, minimal: 2, target: 2, search: search, noHeaders: true}))
		require.Equal(t, "node-01-004\nnode-01-005\n", out.String(), search)
	}
	g, _ := testGlobals()
	err = runSqueeze(t.Context(), g, squeezeOptions{file: path, minimal: 2, target: 2, search: "greedy"})
	require.ErrorAs(t, err, new(usageError))
}
