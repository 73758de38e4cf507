package ganeti

import (
	"fmt"
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

// TestBoundedStepsMatchExact balances generated clusters twice, with the
// full scan and with the bounded scan, and requires the same move (instance,
// kind, target, score to the last bit) at every step.
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
			fast := newBalancer(s.clone(), f)
			fast.bounded = true
			require.Equal(t, full.cur, fast.cur)
			for step := 0; ; step++ {
				m1, ok1 := full.step(0, 0, false, false)
				m2, ok2 := fast.step(0, 0, false, false)
				require.Equal(t, ok1, ok2, "step %d", step)
				if !ok1 {
					break
				}
				require.Equal(t, m1, m2, "step %d", step)
				steps++
			}
			pairs += full.evals
			scored += fast.evals
		})
	}
	t.Logf("%d steps; bounded scan scored %d of %d candidate moves (%.1f%%)", steps, scored, pairs, 100*float64(scored)/float64(max(pairs, 1)))
}
