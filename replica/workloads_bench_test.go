package replica_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/bench/benchtest"
	"github.com/sparsesync/sparsesync/bench/stats"
	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/sparse"
)

// BenchmarkWorkloadExport exports a replica written with each of bench's
// named, seeded workloads (the ones "sparsesync bench" uses): the
// workload's data extents written into a new replica's head, then Export
// to an image on the same filesystem (a fresh ext4 loop filesystem when
// root, else a temporary directory), caches dropped before each run. It
// reports the median time per export (ms).
//
//	go test -run '^$' -bench WorkloadExport -benchtime 3x ./replica -args -workload-scale 1
func BenchmarkWorkloadExport(b *testing.B) {
	dir := benchtest.Dir(b)
	benchtest.Each(b, dir, func(b *testing.B, w bench.Workload, base string) {
		rdir, out := filepath.Join(dir, "r"), filepath.Join(dir, "vol.img")
		defer os.RemoveAll(rdir)
		defer os.Remove(out)
		data, err := writeReplica(b.Context(), rdir, base)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(data)
		var times []time.Duration
		for b.Loop() {
			b.StopTimer()
			os.Remove(out)
			loopfs.DropCaches(b)
			b.StartTimer()
			start := time.Now()
			st, err := replica.Export(b.Context(), rdir, out, nil)
			if err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(start))
			if want := w.ScaledSize(benchtest.Gen()); st.Size != want {
				b.Fatalf("exported a volume of %d bytes, want %d", st.Size, want)
			}
		}
		b.ReportMetric(float64(stats.Median(times).Microseconds())/1000, "median_ms")
	})
}

// writeReplica creates a replica in dir as large as the file at path and
// writes the file's data extents into it. It returns the bytes written.
func writeReplica(ctx context.Context, dir, path string) (int64, error) {
	m, info, err := sparse.ReadMap(ctx, path)
	if err != nil {
		return 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r, err := replica.Create(dir, info.Size, nil)
	if err != nil {
		return 0, err
	}
	buf := coldread.AlignedBuffer(1 << 20)
	for _, e := range m.Extents() {
		for off := e.Off; off < e.End() && err == nil; off += int64(len(buf)) {
			b := buf[:min(int64(len(buf)), e.End()-off)]
			if _, err = f.ReadAt(b, off); err == nil {
				_, err = r.WriteAt(b, off)
			}
		}
		if err != nil {
			break
		}
	}
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	return m.Bytes(), err
}
