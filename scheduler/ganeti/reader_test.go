package ganeti

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAllTestdataLoads: every Ganeti test cluster loads and scores.
func TestAllTestdataLoads(t *testing.T) {
	files, _ := filepath.Glob("testdata/ganeti/*.data")
	require.Len(t, files, 24)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c := loadFile(t, f)
			s, err := Load(c)
			require.NoError(t, err)
			if len(c.Nodes) > 0 {
				require.False(t, math.IsNaN(s.Score()))
			}
		})
	}
}

func TestReadTextSections(t *testing.T) {
	for _, in := range []string{"", "g|u|preferred|\n\n\n", "g|u|preferred|\n\nn|1|0|1|1|1|1|N|u\n"} {
		_, err := ReadText(strings.NewReader(in), "x.data")
		require.ErrorIs(t, err, ErrSyntax, "%q", in)
		require.Contains(t, err.Error(), "x.data")
		require.Contains(t, err.Error(), "sections")
	}
}

func TestReadTextErrorsAreParseErrors(t *testing.T) {
	_, err := ReadText(strings.NewReader("g|u|preferred|\n\nn1|4096|0|x|1|1|1|N|u\n\n\n"), "c.data")
	var pe *ParseError
	require.True(t, errors.As(err, &pe))
	require.Equal(t, ParseError{File: "c.data", Line: 3, Field: "node n1 free memory", Err: pe.Err}, *pe)
	require.ErrorIs(t, err, ErrSyntax)
}

// TestRoundTrips: WriteText/ReadText and WriteJSON/ReadJSON preserve the
// cluster, and the score.
func TestRoundTrips(t *testing.T) {
	files, _ := filepath.Glob("testdata/ganeti/*.data")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c := loadFile(t, f)
			var tb, jb bytes.Buffer
			require.NoError(t, WriteText(&tb, c))
			c2, err := ReadText(&tb, "rt.data")
			require.NoError(t, err)
			require.NoError(t, WriteJSON(&jb, c))
			c3, err := ReadJSON(&jb, "rt.json")
			require.NoError(t, err)
			norm := func(c *Cluster) *Cluster {
				// Ganeti writes the cluster policy even when it was the
				// default and tags lists may come back empty instead of nil.
				var b bytes.Buffer
				require.NoError(t, WriteJSON(&b, c))
				return c
			}
			require.Equal(t, len(c.Nodes), len(c2.Nodes))
			require.Equal(t, norm(c2).Instances, norm(c3).Instances)
			require.Equal(t, c2.Nodes, c3.Nodes)
			s1, err := Load(c)
			require.NoError(t, err)
			s2, err := Load(c2)
			require.NoError(t, err)
			s3, err := Load(c3)
			require.NoError(t, err)
			if len(c.Nodes) > 0 {
				require.Equal(t, s1.Score(), s2.Score())
				require.Equal(t, s1.Score(), s3.Score())
			}
		})
	}
}

func TestReadJSONErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"nodes": [}`, "c.json:1:"},
		{"{\n\"nodes\": [{\"name\": 5}]}", "c.json:2: nodes.name"},
		{`{"bogus": 1}`, "unknown field"},
		{`{"groups":[{"name":"g"}],"nodes":[{"name":"n","group":3,"total_mem":1,"total_cpu":1}]}`, "node n group"},
		{`{"groups":[{"name":"g"}],"nodes":[{"name":"n","group":0,"total_mem":1,"total_cpu":1}],"instances":[{"name":"i","pnode":0,"snode":7,"status":"running","disk_template":"ext"}]}`, "instance i secondary node"},
	} {
		_, err := ReadJSON(strings.NewReader(tc.in), "c.json")
		require.Error(t, err, tc.in)
		require.Contains(t, err.Error(), tc.want)
	}
}

// TestIncrementalScoreMatchesScratch applies random move sequences and
// checks, at every candidate, that the O(1) incremental score equals the
// score recomputed from scratch, and that committed states score the same
// as a fresh computation.
func TestIncrementalScoreMatchesScratch(t *testing.T) {
	kinds := []MoveKind{Failover, Migrate, ReplacePrimary, ReplaceSecondary, ReplaceAndFailover, FailoverAndReplace}
	clusters := []*Cluster{}
	for _, f := range []string{"hbal-evac.data", "hbal-location-exclusion.data", "hbal-excl-tags.data", "hbal-forth.data", "hsqueeze-mixed-instances.data", "hbal-cpu-speed.data"} {
		clusters = append(clusters, loadFile(t, filepath.Join("testdata/ganeti", f)))
	}
	for i := 0; i < 8; i++ {
		clusters = append(clusters, genCluster(uint64(77+i), genSpec{Nodes: 8 + i, Standby: 1, Offline: 1, Instances: 40, DRBD: 0.3, Plain: 0.05, Load: 0.5}))
	}
	r := rand.New(rand.NewPCG(1, 2))
	checked := 0
	for ci, c := range clusters {
		s, err := Load(c)
		require.NoError(t, err)
		if len(s.insts) == 0 {
			continue
		}
		b := newBalancer(s, moveAll)
		for step := 0; step < 150; step++ {
			ii := r.IntN(len(s.insts))
			k := kinds[r.IntN(len(kinds))]
			// Only the moves hbal generates for the instance's mirror type.
			if (k == Migrate) != (s.insts[ii].tmpl.Mirror() == MirrorExternal) {
				continue
			}
			tdx := r.IntN(len(s.nodes))
			if tdx == s.insts[ii].pNode || tdx == s.insts[ii].sNode {
				continue
			}
			force := r.IntN(4) == 0
			var sr moveResult
			est, ok := b.evaluate(&sr, ii, k, tdx, force)
			if !ok {
				continue
			}
			exact := b.exact(cand{ii: int32(ii), tdx: int32(tdx), kind: k}, force)
			// From scratch on a committed copy.
			cp := s.clone()
			var mr moveResult
			require.True(t, cp.applyMove(ii, k, tdx, force, false, &mr))
			cp.commit(ii, &mr)
			scratch := cp.Score()
			require.Equal(t, exact, scratch, "cluster %d step %d: exact rescoring differs from scratch", ci, step)
			require.InDelta(t, scratch, est, 1e-7*math.Max(1, math.Abs(scratch)), "cluster %d step %d: incremental %v vs scratch %v", ci, step, est, scratch)
			checked++
			if r.IntN(2) == 0 {
				// Continue the sequence from the moved state.
				s.applyMove(ii, k, tdx, force, false, &mr)
				s.commit(ii, &mr)
				b.invalidateAll()
				b.reset()
				require.Equal(t, s.Score(), b.cur)
				requirePeersConsistent(t, s)
			}
		}
	}
	require.Greater(t, checked, 500)
}

// requirePeersConsistent checks the N+1 book-keeping of every node against
// its secondaries, as Ganeti's buildPeers would compute it.
func requirePeersConsistent(t *testing.T, s *State) {
	t.Helper()
	for ni := range s.nodes {
		want := map[int]int{}
		for i := range s.insts {
			in := &s.insts[i]
			if in.sNode == ni && !in.forthcoming && in.usesSecMem() {
				want[in.pNode] += in.mem
			}
		}
		got := map[int]int{}
		for _, p := range s.nodes[ni].peers {
			if p.mem > 0 {
				got[p.pdx] = p.mem
			}
		}
		for k, v := range want {
			if v == 0 {
				delete(want, k)
			}
		}
		require.Equal(t, want, got, "node %d peers", ni)
	}
}

func TestMain(m *testing.M) {
	os.Exit(m.Run())
}
