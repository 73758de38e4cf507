package localsync_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/bench/benchtest"
	"github.com/sparsesync/sparsesync/bench/stats"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
)

// BenchmarkWorkloads copies and re-syncs each of bench's named, seeded
// workloads (the ones "sparsesync bench" compares with the other tools)
// after each of its change scripts, with localsync.Copy as "sparsesync
// local" does (durable). It reports the median time per run (ms).
//
//	go test -run '^$' -bench Workloads -benchtime 3x ./localsync -args -workload-scale 1
func BenchmarkWorkloads(b *testing.B) {
	for _, place := range benchPlaces(b, loopfs.Ext4, loopfs.XFS) {
		inPlace(b, place, func(b *testing.B, dir string) {
			benchtest.Each(b, dir, func(b *testing.B, _ bench.Workload, base string) {
				for _, sc := range bench.Scenarios() {
					b.Run(sc, func(b *testing.B) { benchScenario(b, dir, base, sc) })
				}
			})
		})
	}
}

func benchScenario(b *testing.B, dir, base, scenario string) {
	src, dst := benchtest.Source(b, base, scenario), filepath.Join(dir, "dst")
	defer os.Remove(dst)
	var times []time.Duration
	for b.Loop() {
		b.StopTimer()
		os.Remove(dst)
		if scenario != bench.ScenarioCopy { // the target holds the old version
			if _, err := localsync.Copy(b.Context(), base, dst, &localsync.Options{Reflink: localsync.ReflinkNever}); err != nil {
				b.Fatal(err)
			}
		}
		dropCaches(b)
		b.StartTimer()
		start := time.Now()
		if _, err := localsync.Copy(b.Context(), src, dst, nil); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	b.ReportMetric(float64(stats.Median(times).Microseconds())/1000, "median_ms")
}
