package localsync_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/bench/stats"
	"github.com/sparsesync/sparsesync/internal/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
)

// workloadScale scales bench's named workloads for BenchmarkWorkloads (1:
// their full sizes, 2 GiB to 8 GiB).
var workloadScale = flag.Float64("workload-scale", 1.0/16, "size of bench's named workloads in BenchmarkWorkloads (1: full size)")

// BenchmarkWorkloads copies and re-syncs each of bench's named, seeded
// workloads (the ones "sparsesync bench" compares with the other tools)
// after each of its change scripts, with localsync.Copy as "sparsesync
// local" does (durable). It reports the median time per run (ms).
//
//	go test -run '^$' -bench Workloads -benchtime 3x ./localsync -args -workload-scale 1
func BenchmarkWorkloads(b *testing.B) {
	g := bench.GenOptions{Scale: *workloadScale, Seed: 1}
	for _, place := range benchPlaces(b, loopfs.Ext4, loopfs.XFS) {
		inPlace(b, place, func(b *testing.B, dir string) {
			for _, w := range bench.Workloads() {
				b.Run(w.Name, func(b *testing.B) {
					base := filepath.Join(dir, w.Name)
					if err := w.Generate(b.Context(), base, g); err != nil {
						b.Skip(err) // vm-image without mkfs.ext4
					}
					defer os.Remove(base)
					for _, sc := range bench.Scenarios() {
						b.Run(sc, func(b *testing.B) { benchScenario(b, dir, base, sc, g.Seed) })
					}
				})
			}
		})
	}
}

func benchScenario(b *testing.B, dir, base, scenario string, seed uint64) {
	src, dst := base, filepath.Join(dir, "dst")
	defer os.Remove(dst)
	if scenario != bench.ScenarioCopy {
		src = base + "." + scenario
		defer os.Remove(src)
		if _, err := localsync.Copy(b.Context(), base, src, localsync.Options{Reflink: localsync.ReflinkNever}); err != nil {
			b.Fatal(err)
		}
		ch, err := bench.ChangeNamed(scenario)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ch.Apply(b.Context(), src, seed); err != nil {
			b.Fatal(err)
		}
	}
	var times []time.Duration
	for b.Loop() {
		b.StopTimer()
		os.Remove(dst)
		if scenario != bench.ScenarioCopy { // the target holds the old version
			if _, err := localsync.Copy(b.Context(), base, dst, localsync.Options{Reflink: localsync.ReflinkNever}); err != nil {
				b.Fatal(err)
			}
		}
		dropCaches(b)
		b.StartTimer()
		start := time.Now()
		if _, err := localsync.Copy(b.Context(), src, dst, localsync.Options{}); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	b.ReportMetric(float64(stats.Median(times).Microseconds())/1000, "median_ms")
}
