package sparse

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
)

var benchDir = flag.String("sparse.benchdir", "", "directory for benchmark files (default: a temporary directory; point it at a real disk's mount to measure one)")

// manyExtentsFile writes the 100,000-extent layout once per benchmark.
func manyExtentsFile(b *testing.B) (*os.File, int) {
	b.Helper()
	dir := *benchDir
	if dir == "" {
		dir = b.TempDir()
	}
	l := layout.Standard()[len(layout.Standard())-1]
	path := filepath.Join(dir, "sparse-bench-"+l.Name)
	if err := layout.Write(path, l); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.Remove(path) })
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	// Flush now so background writeback of 400 MB does not land in the timings.
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	return f, len(l.Data)
}

// BenchmarkWalk walks 100,000 extents with the Walker and with a bare lseek
// loop written here, in the same run: ns/extent of the two is the walker's
// overhead. Run: go test -run '^$' -bench Walk -count 6 ./sparse
func BenchmarkWalk(b *testing.B) {
	f, want := manyExtentsFile(b)
	ctx := context.Background()
	b.Run("walker", func(b *testing.B) {
		b.ReportAllocs()
		w, err := NewWalker(f)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		count := func(Extent) error { n++; return nil }
		for b.Loop() {
			n = 0
			if err := w.Walk(ctx, count); err != nil {
				b.Fatal(err)
			}
			if n != want {
				b.Fatalf("walked %d extents, want %d", n, want)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(want), "ns/extent")
	})
	b.Run("lseek", func(b *testing.B) {
		b.ReportAllocs()
		fd := int(f.Fd())
		size, err := f.Seek(0, 2)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			n := 0
			for pos := int64(0); pos < size; n++ {
				d, err := unix.Seek(fd, pos, unix.SEEK_DATA)
				if err != nil {
					break
				}
				h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
				if err != nil {
					b.Fatal(err)
				}
				pos = h
			}
			if n != want {
				b.Fatalf("walked %d extents, want %d", n, want)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(want), "ns/extent")
	})
}

// BenchmarkIsZero measures zero detection per block size.
func BenchmarkIsZero(b *testing.B) {
	for _, size := range []int{512, 4096, 1 << 20} {
		buf := make([]byte, size)
		b.Run(byteSize(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if !IsZero(buf) {
					b.Fatal("zero buffer reported non-zero")
				}
			}
		})
	}
}

func byteSize(n int) string {
	switch {
	case n >= 1<<20:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1<<10:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}
