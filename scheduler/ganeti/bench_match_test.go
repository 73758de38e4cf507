package ganeti

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The 40-node/300-instance benchmark cluster is kept in testdata/bench with
// the answer Debian's hsqueeze 3.0.2 gave for it (about five minutes of CPU,
// too slow to rerun in every test run; set SPARSESYNC_SLOW_TOOLS=1 to rerun
// it).
const benchFile = "testdata/bench/nodes40-instances300.data"

func TestBenchClusterIsGenerated(t *testing.T) {
	// The file is what the benchmark generates, so the benchmark and the
	// recorded hsqueeze answer are about the same cluster.
	want, err := os.ReadFile(benchFile)
	require.NoError(t, err)
	var got bytes.Buffer
	require.NoError(t, WriteText(&got, genCluster(benchSpecs[0].seed, benchSpecs[0].spec)))
	require.Equal(t, string(want), got.String())
}

func TestBenchClusterMatchesHsqueeze(t *testing.T) {
	recorded, err := os.ReadFile("testdata/bench/nodes40-instances300.hsqueeze")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(recorded)), "\n")
	require.Equal(t, "'Nodes to offline'", lines[0])
	c := loadFile(t, benchFile)
	res, err := Squeeze(c, &SqueezeOptions{Moves: MoveAll})
	require.NoError(t, err)
	require.Equal(t, SearchBounded, res.Search)
	require.Equal(t, ActionOffline, res.Action)
	require.Equal(t, lines[1:], res.Nodes)

	// The bounded and pruned searches take the same decision.
	for _, search := range []Search{SearchBounded, SearchPruned} {
		res, err = Squeeze(c, &SqueezeOptions{Moves: MoveAll, Search: search})
		require.NoError(t, err)
		require.Equal(t, lines[1:], res.Nodes, "%v search", search)
	}

	if os.Getenv("SPARSESYNC_SLOW_TOOLS") == "1" {
		bin := findTool(t, "hsqueeze")
		action, nodes := runHsqueeze(t, bin, benchFile, 2, 2)
		require.Equal(t, ActionOffline, action)
		require.Equal(t, lines[1:], nodes)
	}
}
