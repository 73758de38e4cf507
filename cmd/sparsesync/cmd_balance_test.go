package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const ganetiTestdata = "../../scheduler/ganeti/testdata/ganeti/"

func testGlobals() (*globalOpts, *bytes.Buffer) {
	var out bytes.Buffer
	return &globalOpts{stdout: &out, stderr: &bytes.Buffer{}}, &out
}

func TestRunBalanceText(t *testing.T) {
	g, out := testGlobals()
	opts := balanceOptions{file: ganetiTestdata + "hbal-migration-1.data", minGain: 0.01, minGainLimit: 0.1, minScore: 1e-9, maxRounds: -1}
	require.NoError(t, runBalance(t.Context(), g, opts))
	// The same four moves and scores as hbal 3.0.2.
	require.Equal(t, `Initial score: 10.13359773
    1. inst131 node-01:node-03 => node-03:node-02 7.87130365 failover-and-replace
    2. inst132 node-01:node-03 => node-03:node-04 6.07872618 failover-and-replace
    3. inst121 node-01:node-02 => node-03:node-01 5.57766466 replace-and-failover
    4. inst121 node-03:node-01 => node-03:node-02 4.91278575 replace-secondary
Final score: 4.91278575
`, out.String())
}

func TestRunBalanceJSON(t *testing.T) {
	g, out := testGlobals()
	opts := balanceOptions{file: ganetiTestdata + "hbal-dyn.data", json: true, minGain: 0.01, minGainLimit: 0.1, minScore: 1e-9, maxRounds: -1}
	require.NoError(t, runBalance(t.Context(), g, opts))
	var res struct {
		Before float64 `json:"score_before"`
		After  float64 `json:"score_after"`
		Moves  []struct {
			Instance, From, To, Kind string
		} `json:"moves"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	require.InDelta(t, 4.0, res.Before, 1e-9)
	require.InDelta(t, 0.03264811, res.After, 1e-8)
	require.Len(t, res.Moves, 1)
	require.Equal(t, "inst-00", res.Moves[0].Instance)
	require.Equal(t, "node-01-001", res.Moves[0].To)
	require.Equal(t, "migrate", res.Moves[0].Kind)
}

func TestRunBalanceErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.data")
	require.NoError(t, os.WriteFile(bad, []byte("g|u|preferred|\n\nn1|x|0|0|0|0|1|N|u\n\n\n\n"), 0o644))
	multi := ganetiTestdata + "hbal-split-insts.data"
	for _, tc := range []struct {
		name, file, want string
	}{
		{"missing file", filepath.Join(dir, "nope.data"), "nope.data"},
		{"bad number", bad, "bad.data:3: node n1 total memory"},
		{"several groups", multi, "node groups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := testGlobals()
			err := runBalance(t.Context(), g, balanceOptions{file: tc.file, maxRounds: -1})
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, errorLine(err), "\n")
		})
	}
}

func TestBalanceCommandFlags(t *testing.T) {
	g, out := testGlobals()
	cmd := newBalanceCommand(g)
	cmd.SetArgs([]string{"-t", ganetiTestdata + "hbal-split-insts.data", "-G", "group-01"})
	cmd.SetOut(out)
	require.NoError(t, cmd.Execute())
	require.True(t, strings.HasPrefix(out.String(), "Initial score: 0.00585938\n"), out.String())

	cmd = newBalanceCommand(g)
	cmd.SetArgs([]string{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetOut(&bytes.Buffer{})
	require.Error(t, cmd.Execute(), "-t is required")
}

// TestBalanceMaxLengthIsHbals: --max-length keeps hbal's meaning (-l 0
// moves nothing, -l 1 one move, the default -1 no limit) though
// ganeti.BalanceOptions' MaxRounds counts 0 as no limit.
func TestBalanceMaxLengthIsHbals(t *testing.T) {
	f := ganetiTestdata + "hbal-location-1.data"
	for _, tc := range []struct {
		args  []string
		moves int
	}{{[]string{"-l", "0"}, 0}, {[]string{"-l", "1"}, 1}, {nil, 5}, {[]string{"-l", "-1"}, 5}} {
		out, _, code, err := runCLI(t, append([]string{"balance", "-t", f}, tc.args...)...)
		if err != nil || code != 0 {
			t.Fatalf("%v: code %d, %v", tc.args, code, err)
		}
		if n := strings.Count(out, "=>"); n != tc.moves {
			t.Fatalf("%v: %d moves, want %d:\n%s", tc.args, n, tc.moves, out)
		}
	}
}
