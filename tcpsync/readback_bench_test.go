package tcpsync

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/sparsesync/sparsesync/bench/stats"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// BenchmarkReadBack measures what the read-back costs (ReadBack): the
// design's workload (2 GiB, 10% data) pushed atomically to an in-process
// server on an ext4 loop filesystem, with the read-back (the default for
// atomic) and without, in interleaved pairs; it reports the median wall
// time of each and the median of the per-pair ratios. "full" pushes to an
// empty target, "1pct" a source with 1% of its blocks changed onto the old
// version. SPARSESYNC_BENCH_RUNS pairs (5). Run with
//
//	go test ./tcpsync -run '^$' -bench ReadBack -benchtime 1x
func BenchmarkReadBack(b *testing.B) {
	loopfs.NeedRoot(b)
	runs := 5
	if s := os.Getenv("SPARSESYNC_BENCH_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	mnt := loopfs.Mount(b, loopfs.Ext4, 8<<30)
	work, root := filepath.Join(mnt, "work"), filepath.Join(mnt, "root")
	for _, d := range []string{work, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	orig, mutated := filepath.Join(work, "orig.img"), filepath.Join(work, "mutated.img")
	if err := writeImage(orig, 2<<30, 0.1, 104, 2026); err != nil {
		b.Fatal(err)
	}
	cpSparse(b, orig, mutated)
	mutate(b, mutated, 514, 7)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, wait, err := ServeLoopback(ctx, &Server{Root: root, NoAuth: true})
	if err != nil {
		b.Fatal(err)
	}
	dst := filepath.Join(root, "img")
	push := func(src, base string, rb ReadBack) float64 {
		os.Remove(dst + sidecarSuffix)
		os.Remove(dst)
		if base != "" {
			cpSparse(b, base, dst)
		}
		syscall.Sync()
		st, err := PushFile(ctx, addr, src, "img", &Options{NoAuth: true, MaxAttempts: 1, Atomic: true, ReadBack: rb})
		if err != nil || !st.Verified || st.ReadBack != (rb == ReadBackAuto) {
			b.Fatalf("push: %v %+v", err, st)
		}
		return st.Elapsed.Seconds()
	}
	for _, c := range []struct{ name, src, base string }{{"full", orig, ""}, {"1pct", mutated, orig}} {
		b.Run(c.name, func(b *testing.B) {
			var on, off []float64
			for b.Loop() {
				for i := range runs {
					a, z := stats.Pair(i,
						func() float64 { return push(c.src, c.base, ReadBackAuto) },
						func() float64 { return push(c.src, c.base, ReadBackOff) })
					on, off = append(on, a), append(off, z)
				}
			}
			ratio := stats.PairedRatio(on, off)
			b.Logf("%s: read-back %.3f s, without %.3f s, paired ratio %.2fx (ratios %.2f)", c.name, stats.Median(on), stats.Median(off), ratio, stats.Ratios(on, off))
			b.ReportMetric(stats.Median(on), "readback-wall-s")
			b.ReportMetric(stats.Median(off), "plain-wall-s")
			b.ReportMetric(ratio, "paired-ratio")
		})
	}
	cancel()
	_ = wait()
}
