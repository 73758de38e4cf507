package tcpsync_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/bench/stats"
	"github.com/sparsesync/sparsesync/internal/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// workloadScale scales bench's named workloads for BenchmarkWorkloads (1:
// their full sizes, 2 GiB to 8 GiB).
var workloadScale = flag.Float64("workload-scale", 1.0/16, "size of bench's named workloads in BenchmarkWorkloads (1: full size)")

// BenchmarkWorkloads pushes each of bench's named, seeded workloads (the
// ones "sparsesync bench" compares with the other tools) over loopback to
// an in-process server: to an empty target ("copy"), and after each of its
// change scripts onto the old version. Source and server root share one
// filesystem: a fresh ext4 loop filesystem when root, else a temporary
// directory. Caches are dropped before every push. It reports the median
// time per push (ms) and the median bytes sent on the wire.
//
//	go test -run '^$' -bench Workloads -benchtime 3x ./tcpsync -args -workload-scale 1
func BenchmarkWorkloads(b *testing.B) {
	g := bench.GenOptions{Scale: *workloadScale, Seed: 1}
	dir := b.TempDir()
	if os.Geteuid() == 0 {
		dir = loopfs.Mount(b, loopfs.Ext4, 12<<30)
	}
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	addr, wait, err := tcpsync.ServeLoopback(ctx, &tcpsync.Server{Root: root, NoAuth: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		cancel()
		if err := wait(); err != nil {
			b.Error(err)
		}
	}()
	for _, w := range bench.Workloads() {
		b.Run(w.Name, func(b *testing.B) {
			base := filepath.Join(dir, w.Name)
			if err := w.Generate(b.Context(), base, g); err != nil {
				b.Skip(err) // vm-image without mkfs.ext4
			}
			defer os.Remove(base)
			for _, sc := range bench.Scenarios() {
				b.Run(sc, func(b *testing.B) { benchPush(b, addr, root, base, sc, g.Seed) })
			}
		})
	}
}

// benchPush times pushes of the workload at base, changed by scenario
// (unless it is the copy), to the server at addr whose root is root.
func benchPush(b *testing.B, addr, root, base, scenario string, seed uint64) {
	src := base
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
	defer emptyDir(b, root)
	var times []time.Duration
	var wire []int64
	for b.Loop() {
		b.StopTimer()
		emptyDir(b, root)                   // the target and its sidecar
		if scenario != bench.ScenarioCopy { // the target holds the old version
			if _, err := localsync.Copy(b.Context(), base, filepath.Join(root, "img"), localsync.Options{Reflink: localsync.ReflinkNever}); err != nil {
				b.Fatal(err)
			}
		}
		loopfs.DropCaches(b)
		b.StartTimer()
		start := time.Now()
		st, err := tcpsync.PushFile(b.Context(), addr, src, "img", &tcpsync.Options{NoAuth: true, Retries: -1})
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
		wire = append(wire, st.WireBytesSent)
	}
	b.ReportMetric(float64(stats.Median(times).Microseconds())/1000, "median_ms")
	b.ReportMetric(float64(stats.Median(wire)), "wire-B")
}

// emptyDir removes everything in dir (the server keeps dir itself open).
func emptyDir(b *testing.B, dir string) {
	b.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			b.Fatal(err)
		}
	}
}
