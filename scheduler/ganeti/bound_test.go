package ganeti

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// genBoundCase is the i-th cluster of the bounded-scan differential test:
// 10 to 30 nodes, 4 to 8 instances per node, and up to three nodes set
// offline as a squeeze would (so that steps drain them).
func genBoundCase(i int) (*Cluster, []int, moveFilter) {
	r := rand.New(rand.NewPCG(uint64(i), 99))
	sp := genSpec{Nodes: 10 + r.IntN(21), Standby: r.IntN(3), Offline: r.IntN(2),
		DRBD: []float64{0, 0, 0.1, 0.2}[r.IntN(4)], Plain: []float64{0, 0.03}[r.IntN(2)],
		Load: []float64{0.3, 0.5, 0.7, 0.9}[r.IntN(4)]}
	sp.Instances = sp.Nodes * (4 + r.IntN(5))
	c := genCluster(uint64(70000+i), sp)
	var off []int
	for k := r.IntN(4); k > 0; k-- {
		off = append(off, 1+r.IntN(sp.Nodes-1))
	}
	f := []moveFilter{moveAll, moveExternal, moveDRBD}[r.IntN(3)]
	return c, off, f
}

const boundCases = 220

// TestBoundedStepsMatchExact balances generated clusters with the full scan
// and with the bounded scan, and requires the same move (instance, kind,
// target, score to the last bit) at every step. The bounded scan keeps its
// target keys across steps (see scanBounded); it runs with the default
// refresh, with a refresh every step, and with none after the first
// (every step's bounds then rest on the drift correction and on the keys
// of the nodes moves changed, so a node whose keys are not renewed, or a
// drift left out, picks a different move here).
func TestBoundedStepsMatchExact(t *testing.T) {
	var pairs, scored, steps int
	for i := 0; i < boundCases; i++ {
		c, off, f := genBoundCase(i)
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			s, err := Load(c)
			require.NoError(t, err)
			for _, n := range off {
				s.nodes[n].offline = true
			}
			full := newBalancer(s.clone(), f)
			var fast [3]*balancer
			for k, every := range []int{0, 1, 1 << 30} {
				fast[k] = newBalancer(s.clone(), f)
				fast[k].bounded = true
				fast[k].refreshAfter = every
				require.Equal(t, full.cur, fast[k].cur)
			}
			for step := 0; ; step++ {
				m1, ok1 := full.step(0, 0, false, false)
				for k, fb := range fast {
					m2, ok2 := fb.step(0, 0, false, false)
					require.Equal(t, ok1, ok2, "step %d, bounded scan %d", step, k)
					if ok1 {
						require.Equal(t, m1, m2, "step %d, bounded scan %d", step, k)
					}
				}
				if !ok1 {
					break
				}
				steps++
			}
			pairs += full.evals
			scored += fast[0].evals
		})
	}
	t.Logf("%d steps; bounded scan scored %d of %d candidate moves (%.1f%%)", steps, scored, pairs, 100*float64(scored)/float64(max(pairs, 1)))
}

// TestDRBDBoundBelowEstimate checks the DRBD bound itself: on the
// generated clusters that have DRBD instances free to move, every disk move
// (instance, kind, target) of the first 40 balancing steps has a bound no
// larger than its estimate, and the move applyMove makes changes every
// metric within the intervals the bound was built from (own nodes plus
// target). The pruning is only sound if this holds; the step comparison
// above shows an error only where a pruned move would have won.
func TestDRBDBoundBelowEstimate(t *testing.T) {
	var pairs, cases int
	for i := 0; i < boundCases; i++ {
		c, off, f := genBoundCase(i)
		if f == moveExternal {
			continue
		}
		s, err := Load(c)
		require.NoError(t, err)
		for _, n := range off {
			s.nodes[n].offline = true
		}
		b := newBalancer(s, f)
		b.bounded = true
		var bad string
		var r moveResult
		b.onBound = func(ii int, kind MoveKind, tdx int, bound, est float64, own, tgt *ivEntry) {
			pairs++
			if bad != "" {
				return
			}
			what := fmt.Sprintf("case %d: %s %s to node %d", i, s.instName(ii), kind, tdx)
			if bound-boundSlack*(1+math.Abs(bound)) > est {
				bad = fmt.Sprintf("%s: bound %.17g above estimate %.17g", what, bound, est)
				return
			}
			// The move as applyMove makes it: the change of every
			// metric lies in the intervals the bound was built from.
			require.True(t, b.s.applyMove(ii, kind, tdx, false, true, &r))
			a := &b.agg
			var ds, dq metricVec
			lin := 0.0
			for k := 0; k < r.nn; k++ {
				idx := r.idx[k]
				nv := r.nodes[k].vector()
				old := &b.vecs[idx]
				for _, m := range a.active {
					kind := metricKinds[m]
					if (kind == mSumOffline) != b.s.nodes[idx].offline {
						continue
					}
					if kind != mStdDev {
						lin += a.w[m] * (nv[m] - old[m])
						continue
					}
					u, uo := nv[m]-a.shift[m], old[m]-a.shift[m]
					ds[m] += u - uo
					dq[m] += u*u - uo*uo
				}
			}
			eps := func(x float64) float64 { return 1e-9 * (1 + math.Abs(x)) }
			if l := own.lin + tgt.lin; lin < l-eps(l) {
				bad = fmt.Sprintf("%s: sums change %g below its bound %g", what, lin, l)
			}
			for _, m := range a.active {
				if metricKinds[m] != mStdDev {
					continue
				}
				lo, hi, q := own.dlo[m]+tgt.dlo[m], own.dhi[m]+tgt.dhi[m], own.qlo[m]+tgt.qlo[m]
				if ds[m] < lo-eps(lo) || ds[m] > hi+eps(hi) || dq[m] < q-eps(q) {
					bad = fmt.Sprintf("%s: metric %s: sum change %g not in [%g, %g] or squares %g below %g", what, metricNames[m], ds[m], lo, hi, dq[m], q)
					for k := 0; k < r.nn; k++ {
						idx := r.idx[k]
						nv := r.nodes[k].vector()
						bad += fmt.Sprintf("\n node %d (p %d s %d) off=%v: %g -> %g rmem %d->%d peers %v / %v", idx, b.s.insts[ii].pNode, b.s.insts[ii].sNode, b.s.nodes[idx].offline, b.vecs[idx][m], nv[m], b.s.nodes[idx].rMem, r.nodes[k].rMem, b.s.nodes[idx].peers, r.nodes[k].peers)
					}
					bad += fmt.Sprintf("\n own %v %v tgt %v %v", own.dlo[m], own.dhi[m], tgt.dlo[m], tgt.dhi[m])
				}
			}
		}
		for step := 0; step < 40; step++ {
			if _, ok := b.step(0, 0, false, false); !ok || bad != "" {
				break
			}
		}
		require.Empty(t, bad)
		cases++
	}
	require.NotZero(t, pairs)
	t.Logf("%d clusters, %d DRBD disk moves checked", cases, pairs)
}

// TestAutoSearchIsExactOnBenchmark: the cluster (500 nodes, 5,000
// instances, a quarter DRBD, every instance moving) is within ExactLimit,
// so auto takes hsqueeze's decisions (BenchmarkSqueeze times it); three
// times its DRBD instances are not.
func TestAutoSearchIsExactOnBenchmark(t *testing.T) {
	for _, tc := range []struct {
		drbd float64
		want Search
	}{{0.25, SearchBounded}, {0.75, SearchIncremental}} {
		c := genCluster(5005000, genSpec{Nodes: 500, Standby: 10, Offline: 2, Instances: 5000, DRBD: tc.drbd, Load: 0.45})
		s, err := Load(c)
		require.NoError(t, err)
		for _, m := range []MoveMode{MoveAll, MoveDRBD} {
			opts := SqueezeOptions{Moves: m}
			opts.setDefaults()
			require.Equal(t, tc.want, autoSearch(s, m.filter(), &opts), "drbd %v, moves %v", tc.drbd, m)
		}
		opts := SqueezeOptions{}
		opts.setDefaults()
		require.Equal(t, SearchBounded, autoSearch(s, MoveExternal.filter(), &opts))
	}
}
