package tcpsync_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/bench/benchtest"
	"github.com/sparsesync/sparsesync/bench/stats"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
	"github.com/sparsesync/sparsesync/tcpsync"
)

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
	dir := benchtest.Dir(b)
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
	benchtest.Each(b, dir, func(b *testing.B, _ bench.Workload, base string) {
		for _, sc := range bench.Scenarios() {
			b.Run(sc, func(b *testing.B) { benchPush(b, addr, root, base, sc) })
		}
	})
}

// benchPush times pushes of the workload at base, changed by scenario
// (unless it is the copy), to the server at addr whose root is root.
func benchPush(b *testing.B, addr, root, base, scenario string) {
	src := benchtest.Source(b, base, scenario)
	defer emptyDir(b, root)
	var times []time.Duration
	var wire []int64
	for b.Loop() {
		b.StopTimer()
		emptyDir(b, root)                   // the target and its sidecar
		if scenario != bench.ScenarioCopy { // the target holds the old version
			if _, err := localsync.Copy(b.Context(), base, filepath.Join(root, "img"), &localsync.Options{Reflink: localsync.ReflinkNever}); err != nil {
				b.Fatal(err)
			}
		}
		loopfs.DropCaches(b)
		b.StartTimer()
		start := time.Now()
		st, err := tcpsync.PushFile(b.Context(), addr, src, "img", &tcpsync.Options{NoAuth: true, MaxAttempts: 1})
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
