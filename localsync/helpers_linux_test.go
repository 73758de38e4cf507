package localsync_test

import (
	"bytes"
	"cmp"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// scattered is a layout of about pct% data in extents of 64 KiB to 4 MiB
// (log-uniform, 4 KiB aligned), seeded so runs are repeatable.
func scattered(name string, size int64, pct int, seed uint64) layout.Layout {
	r := rand.New(rand.NewPCG(seed, 1))
	l := layout.Layout{Name: name, Size: size}
	want := size * int64(pct) / 100
	var got int64
	for got < want {
		n := int64(64*kib) << r.IntN(7) // 64 KiB .. 4 MiB
		n = min(n, want-got+4*kib) / (4 * kib) * (4 * kib)
		off := r.Int64N((size-n)/(4*kib)) * (4 * kib)
		l.Data = append(l.Data, layout.Range{Off: off, Len: n})
		got += n
	}
	slices.SortFunc(l.Data, func(a, b layout.Range) int { return int(a.Off - b.Off) })
	// merge overlaps so DataBytes is exact
	var out []layout.Range
	for _, d := range l.Data {
		if k := len(out); k > 0 && d.Off <= out[k-1].End() {
			out[k-1].Len = max(out[k-1].End(), d.End()) - out[k-1].Off
			continue
		}
		out = append(out, d)
	}
	l.Data = out
	return l
}

// runAll runs fn on a fresh filesystem of every kind, the kinds in
// parallel with each other and with the other parallel tests (the
// filesystem tests are I/O-bound; this keeps the package under its time
// budget). Tests that swap the syscall hooks must not use it.
func runAll(t *testing.T, size int64, fn func(t *testing.T, kind loopfs.Kind, dir string)) {
	t.Helper()
	t.Parallel()
	for _, kind := range loopfs.All {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			fn(t, kind, loopfs.Mount(t, kind, size))
		})
	}
}

// checkSame asserts dst is src to the byte and to the hole: same size, same
// SEEK_DATA map, allocation at most the source's plus 1 MiB, equal bytes in
// every data range.
func checkSame(t *testing.T, src, dst string) {
	t.Helper()
	checkSameBytes(t, src, dst)
	require.LessOrEqual(t, allocated(t, dst), allocated(t, src)+mib, "allocation of %s", dst)
}

// checkSameBytes is checkSame without the allocation bound.
func checkSameBytes(t *testing.T, src, dst string) {
	t.Helper()
	sst, err := os.Stat(src)
	require.NoError(t, err)
	dst2, err := os.Stat(dst)
	require.NoError(t, err)
	require.Equal(t, sst.Size(), dst2.Size(), "size of %s", dst)
	syncFile(t, src)
	syncFile(t, dst)
	sm, dm := layout.SeekWalk(t, src), layout.SeekWalk(t, dst)
	require.Equal(t, sm, dm, "hole map of %s differs from %s", dst, src)
	compareRanges(t, src, dst, sm)
}

// checkIdentical asserts equal size and equal bytes wherever either file has
// data (a hole reads as zeros), without requiring equal hole maps: on XFS a
// destination that shared blocks keeps copy-on-write preallocation that
// SEEK_DATA reports as data while it is cached, though it reads as zeros.
func checkIdentical(t *testing.T, src, dst string) {
	t.Helper()
	sst, err := os.Stat(src)
	require.NoError(t, err)
	dstat, err := os.Stat(dst)
	require.NoError(t, err)
	require.Equal(t, sst.Size(), dstat.Size(), "size of %s", dst)
	syncFile(t, src)
	syncFile(t, dst)
	compareRanges(t, src, dst, unionRanges(layout.SeekWalk(t, src), layout.SeekWalk(t, dst)))
}

// unionRanges merges two sorted range lists.
func unionRanges(a, b []layout.Range) []layout.Range {
	all := append(append([]layout.Range(nil), a...), b...)
	slices.SortFunc(all, func(x, y layout.Range) int { return cmp.Compare(x.Off, y.Off) })
	var out []layout.Range
	for _, r := range all {
		if n := len(out); n > 0 && r.Off <= out[n-1].End() {
			out[n-1].Len = max(out[n-1].End(), r.End()) - out[n-1].Off
			continue
		}
		out = append(out, r)
	}
	return out
}

func allocated(t *testing.T, path string) int64 { return layout.Allocated(t, path) }

var cmpBufs = sync.Pool{New: func() any { b := make([]byte, 8*mib); return &b }}

// compareRanges asserts the two files hold equal bytes in ranges.
func compareRanges(t *testing.T, a, b string, ranges []layout.Range) {
	t.Helper()
	fa, err := os.Open(a)
	require.NoError(t, err)
	defer fa.Close()
	fb, err := os.Open(b)
	require.NoError(t, err)
	defer fb.Close()
	ba, bb := cmpBufs.Get().(*[]byte), cmpBufs.Get().(*[]byte)
	defer cmpBufs.Put(ba)
	defer cmpBufs.Put(bb)
	for _, r := range ranges {
		for off := r.Off; off < r.End(); {
			n := min(int64(len(*ba)), r.End()-off)
			x, y := (*ba)[:n], (*bb)[:n]
			_, err := io.ReadFull(io.NewSectionReader(fa, off, n), x)
			require.NoError(t, err)
			_, err = io.ReadFull(io.NewSectionReader(fb, off, n), y)
			require.NoError(t, err)
			if !bytes.Equal(x, y) {
				i := 0
				for x[i] == y[i] {
					i++
				}
				t.Fatalf("%s and %s differ at offset %d", a, b, off+int64(i))
			}
			off += n
		}
	}
}

// checkStatsAdd asserts the byte counts add up to the data.
func checkStatsAdd(t *testing.T, st localsync.Stats) {
	t.Helper()
	require.Equal(t, st.DataBytes, st.ClonedBytes+st.CopiedBytes+st.UnchangedBytes+st.ZeroBytes, "stats do not add up: %+v", st)
}

// fileHash reads a whole file for "unchanged" checks.
func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func syncFile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Sync())
}

// writeAt writes b into path at off (a change made behind any sync).
func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
