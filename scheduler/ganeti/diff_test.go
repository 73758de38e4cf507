package ganeti

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func loadFile(t testing.TB, path string) *Cluster {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	c, err := ReadText(f, path)
	require.NoError(t, err)
	return c
}

// TestBalanceMatchesHbal: on every hbal-*.data file the initial score
// equals hbal's to 1e-6 and the final score is equal or lower.
func TestBalanceMatchesHbal(t *testing.T) {
	bin := findTool(t, "hbal")
	files, _ := filepath.Glob("testdata/ganeti/hbal-*.data")
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			c := loadFile(t, f)
			opts := DefaultBalanceOptions()
			var extra []string
			if len(c.Groups) > 1 {
				opts.Group = c.Groups[0].Name
				extra = []string{"-G", c.Groups[0].Name}
			}
			res, err := Balance(c, opts)
			require.NoError(t, err)
			ini, fin := hbalScores(t, bin, f, extra...)
			require.InDelta(t, ini, res.InitialScore, 1e-6, "initial score")
			require.LessOrEqual(t, res.FinalScore, fin+1e-8, "final score")
		})
	}
}

var ganetiSqueezeOptions = [][2]float64{
	// Ganeti's own shelltests: target 0, 1, 2, 3 (minimal default 2) and
	// minimal 0, 1, 2, 3, 4 with target 5.
	{2, 0}, {2, 1}, {2, 2}, {2, 3}, {0, 5}, {1, 5}, {2, 5}, {3, 5}, {4, 5},
}

// TestSqueezeMatchesHsqueezeFiles runs Ganeti's three hsqueeze clusters with
// Ganeti's option sets through both planners.
func TestSqueezeMatchesHsqueezeFiles(t *testing.T) {
	bin := findTool(t, "hsqueeze")
	files, _ := filepath.Glob("testdata/ganeti/hsqueeze-*.data")
	require.Len(t, files, 3)
	for _, f := range files {
		for _, o := range ganetiSqueezeOptions {
			t.Run(fmt.Sprintf("%s/min=%v/target=%v", filepath.Base(f), o[0], o[1]), func(t *testing.T) {
				t.Parallel()
				c := loadFile(t, f)
				action, nodes := runHsqueeze(t, bin, f, o[0], o[1])
				for _, search := range []Search{SearchAuto, SearchExact, SearchBounded} {
					res, err := Squeeze(c, &SqueezeOptions{MinimalResources: o[0], TargetResources: o[1], MinimalSet: true, TargetSet: true, Moves: MoveAll, Search: search})
					require.NoError(t, err)
					require.Equal(t, action, res.Action, "%v search", search)
					require.Equal(t, strings.Join(nodes, ","), strings.Join(res.Nodes, ","), "%v search", search)
				}
			})
		}
	}
}

const generatedSqueezeCases = 80

// TestSqueezeMatchesHsqueezeGenerated compares decisions on seeded generated
// clusters (varied node sizes, loads, standby tags and DRBD pairs): 60 of 5
// to 10 nodes and 20 of 12 to 18 nodes. The
// exact, bounded and pruned searches must take hsqueeze's decision every
// time (the bounded one with the exact search's moves);
// the incremental search, which trades fidelity for speed, must agree on
// at least 80% of the clusters.
func TestSqueezeMatchesHsqueezeGenerated(t *testing.T) {
	bin := findTool(t, "hsqueeze")
	var mu sync.Mutex
	actions := map[string]int{}
	incAgree := 0
	t.Run("cases", func(t *testing.T) {
		for i := 0; i < generatedSqueezeCases; i++ {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				c, minF, tgtF := genSqueezeCase(i)
				path := writeTextFile(t, c)
				action, nodes := runHsqueeze(t, bin, path, minF, tgtF)
				want := action + " " + strings.Join(nodes, ",")
				var exactMoves []SqueezeMove
				for _, search := range []Search{SearchExact, SearchBounded, SearchPruned, SearchIncremental} {
					res, err := Squeeze(c, &SqueezeOptions{MinimalResources: minF, TargetResources: tgtF,
						MinimalSet: true, TargetSet: true, Moves: MoveAll, Search: search})
					require.NoError(t, err)
					require.Equal(t, search, res.Search)
					got := res.Action + " " + strings.Join(res.Nodes, ",")
					if search == SearchIncremental {
						if got == want {
							mu.Lock()
							incAgree++
							mu.Unlock()
						}
						continue
					}
					require.Equal(t, want, got, "%v search (min %v, target %v)", search, minF, tgtF)
					switch search {
					case SearchExact:
						exactMoves = res.Moves
					case SearchBounded:
						require.Equal(t, exactMoves, res.Moves, "bounded search moves")
					}
				}
				mu.Lock()
				actions[action]++
				mu.Unlock()
			})
		}
	})
	if t.Failed() {
		return
	}
	// Every kind of decision must be exercised, or the suite proves little.
	for _, a := range []string{ActionOffline, ActionOnline, ActionNone} {
		require.NotZero(t, actions[a], "no generated case led to action %q: %v", a, actions)
	}
	t.Logf("actions %v; incremental search agreed on %d of %d", actions, incAgree, generatedSqueezeCases)
	require.GreaterOrEqual(t, incAgree*100, 80*generatedSqueezeCases, "incremental search agreement")
}
