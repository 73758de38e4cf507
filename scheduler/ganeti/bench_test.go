package ganeti

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// benchSpecs are the benchmark clusters: the 40/300 one is compared with
// hsqueeze on the same file (see TestBenchClusterMatchesHsqueeze), the
// 500/5000 one must be decided in under a minute.
var benchSpecs = []struct {
	name string
	seed uint64
	spec genSpec
}{
	{"nodes=40/instances=300", 40300, genSpec{Nodes: 40, Standby: 2, Offline: 1, Instances: 300, DRBD: 0.1, Load: 0.45}},
	{"nodes=500/instances=5000", 5005000, genSpec{Nodes: 500, Standby: 10, Offline: 2, Instances: 5000, DRBD: 0.1, Load: 0.45}},
	// A quarter DRBD, every instance moving, the exact (bounded) search:
	// the DRBD bound's figure in docs/benchmarks.md.
	{"nodes=150/instances=1500/drbd=0.25", 5005000, genSpec{Nodes: 150, Standby: 4, Offline: 2, Instances: 1500, DRBD: 0.25, Load: 0.45}},
	// The acceptance cluster: 500 nodes, a quarter DRBD, every
	// instance moving, hsqueeze's decisions in under a minute of CPU.
	{"nodes=500/instances=5000/drbd=0.25", 5005000, genSpec{Nodes: 500, Standby: 10, Offline: 2, Instances: 5000, DRBD: 0.25, Load: 0.45}},
}

// BenchmarkSqueeze runs every search on the 40/300 cluster moving every
// instance (hsqueeze's setting). On 500/5000 it runs auto with the default
// moves (externally mirrored instances) and with every instance moving
// (about 500 movable DRBD instances on 500 nodes, within ExactLimit): both
// the bounded search, hsqueeze's decisions. On the quarter-DRBD clusters
// it runs the bounded search moving every instance.
func BenchmarkSqueeze(b *testing.B) {
	type run struct {
		search Search
		moves  MoveMode
	}
	for _, bs := range benchSpecs {
		c := genCluster(bs.seed, bs.spec)
		runs := []run{{SearchAuto, MoveExternal}, {SearchAuto, MoveAll}}
		switch {
		case bs.spec.Nodes <= 40:
			runs = []run{{SearchExact, MoveAll}, {SearchBounded, MoveAll}, {SearchPruned, MoveAll}}
		case bs.spec.DRBD >= 0.25:
			runs = []run{{SearchBounded, MoveAll}}
		}
		for _, r := range runs {
			name := bs.name + "/search=" + r.search.String() + "/moves=" + [...]string{"external", "drbd", "all"}[r.moves]
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				var res *SqueezeResult
				for b.Loop() {
					var err error
					res, err = Squeeze(c, &SqueezeOptions{Moves: r.moves, Search: r.search})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(res.Nodes)), "nodes")
				b.ReportMetric(float64(res.Stats.Balances), "balances")
				b.ReportMetric(float64(res.Stats.Steps), "steps")
				b.ReportMetric(float64(res.Stats.Evaluations), "evals")
			})
		}
	}
}

func BenchmarkBalance(b *testing.B) {
	for _, bs := range benchSpecs[:1] {
		c := genCluster(bs.seed, bs.spec)
		b.Run(bs.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Balance(c, DefaultBalanceOptions()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestWriteBenchClusters writes the benchmark clusters in the text format
// to the directory SPARSESYNC_BENCH_CLUSTERS names (for timing the CLI on
// them, as docs/benchmarks.md does): nodes500-instances5000-drbd0.25.data and so on.
func TestWriteBenchClusters(t *testing.T) {
	dir := os.Getenv("SPARSESYNC_BENCH_CLUSTERS")
	if dir == "" {
		t.Skip("set SPARSESYNC_BENCH_CLUSTERS to a directory")
	}
	for _, bs := range benchSpecs {
		name := strings.NewReplacer("=", "", "/", "-").Replace(bs.name) + ".data"
		var buf bytes.Buffer
		require.NoError(t, WriteText(&buf, genCluster(bs.seed, bs.spec)))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644))
	}
}
