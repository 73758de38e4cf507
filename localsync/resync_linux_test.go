package localsync_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
	"github.com/sparsesync/sparsesync/sparse"
	"golang.org/x/sys/unix"
)

// TestIncremental changes a copied source — 37 random 4 KiB blocks
// rewritten, one data extent punched, one hole filled, 5 MiB of trailing
// hole added — and checks that the re-sync makes an identical copy while
// writing exactly the changed bytes and punching exactly the punched ones.
func TestIncremental(t *testing.T) {
	runAll(t, 2*gib, func(t *testing.T, kind loopfs.Kind, dir string) {
		l := scattered("base", 256*mib, 20, 11)
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		layout.Create(t, src, l)
		_, err := localsync.Copy(t.Context(), src, dst, nil)
		require.NoError(t, err)

		f, err := os.OpenFile(src, os.O_RDWR, 0)
		require.NoError(t, err)
		defer f.Close()
		// Punch the first data extent, fill the first hole of 1 MiB or more
		// after it, and rewrite 37 distinct blocks elsewhere.
		punch := l.Data[0]
		_, err = sparse.PunchHole(f, punch.Off, punch.Len)
		require.NoError(t, err)
		var fill layout.Range
		for i := 1; i < len(l.Data); i++ {
			if gap := l.Data[i].Off - l.Data[i-1].End(); gap >= 2*mib {
				fill = layout.Range{Off: l.Data[i-1].End() + 256*kib, Len: mib}
				break
			}
		}
		require.NotZero(t, fill.Len)
		buf := make([]byte, fill.Len)
		for i := range buf {
			buf[i] = byte(i%251) + 1
		}
		_, err = f.WriteAt(buf, fill.Off)
		require.NoError(t, err)
		rewriteBlocks(t, f, l.Data[1:], 37, rand.New(rand.NewPCG(5, 5)))
		require.NoError(t, f.Truncate(l.Size+5*mib))

		st, err := localsync.Copy(t.Context(), src, dst, nil)
		require.NoError(t, err)
		checkSame(t, src, dst)
		checkStatsAdd(t, st)
		require.Equal(t, 37*4096+fill.Len, st.ClonedBytes+st.CopiedBytes, "written bytes: %+v", st)
		require.Equal(t, punch.Len, st.PunchedBytes, "punched bytes: %+v", st)
		require.Zero(t, st.ZeroedBytes)
		if kind.Reflink() {
			// The filled hole is cloned; the short changed runs are
			// written from the comparison buffer.
			require.Equal(t, fill.Len, st.ClonedBytes, "%+v", st)
			require.Equal(t, localsync.MethodMixed, st.Method, "%+v", st)
		}

		// Unchanged, warm (checkSame read both files) and then cold: on XFS
		// the source's rewritten blocks leave copy-on-write preallocations
		// (FIEMAP: unwritten) that SEEK_DATA may report as data; they read
		// as zeros and must not be copied either way.
		st, err = localsync.Copy(t.Context(), src, dst, nil)
		require.NoError(t, err)
		require.Zero(t, st.ClonedBytes+st.CopiedBytes+st.PunchedBytes+st.ZeroedBytes, "second re-sync (warm) wrote: %+v", st)
		dropCache(t, src)
		dropCache(t, dst)
		st, err = localsync.Copy(t.Context(), src, dst, nil)
		require.NoError(t, err)
		require.Zero(t, st.ClonedBytes+st.CopiedBytes+st.PunchedBytes+st.ZeroedBytes, "third re-sync (cold) wrote: %+v", st)
		checkIdentical(t, src, dst)
		st, err = localsync.Copy(t.Context(), src, dst, nil)
		require.NoError(t, err)
		require.Zero(t, st.ClonedBytes+st.CopiedBytes+st.PunchedBytes+st.ZeroedBytes, "fourth re-sync (warm again) wrote: %+v", st)
	})
}

// TestShrink syncs a 1 GiB source onto its old 2 GiB copy: nothing of the
// old tail survives, even when the source grows back.
func TestShrink(t *testing.T) {
	runAll(t, 2*gib, func(t *testing.T, kind loopfs.Kind, dir string) {
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		layout.Create(t, src, layout.Layout{Name: "2g", Size: 2 * gib, Data: layout.Ranges(0, mib, gib-mib, 2*mib, 2*gib-4*mib, 4*mib)})
		_, err := localsync.Copy(t.Context(), src, dst, nil)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(src, gib))
		st, err := localsync.Copy(t.Context(), src, dst, nil)
		require.NoError(t, err)
		require.Equal(t, gib, st.Size)
		checkSame(t, src, dst)
		require.NoError(t, os.Truncate(src, 2*gib))
		_, err = localsync.Copy(t.Context(), src, dst, nil)
		require.NoError(t, err)
		checkSame(t, src, dst)
		require.Equal(t, layout.Ranges(0, mib, gib-mib, mib), layout.SeekWalk(t, dst))
	})
}

// TestAtomic re-syncs through a temporary file: the result is right, no
// temporary file is left, and on XFS/btrfs the temporary file starts as a
// clone of the old destination so only the change is written.
func TestAtomic(t *testing.T) {
	runAll(t, gib, func(t *testing.T, kind loopfs.Kind, dir string) {
		l := scattered("a", 64*mib, 20, 2)
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		layout.Create(t, src, l)
		st, err := localsync.Copy(t.Context(), src, dst, &localsync.Options{Atomic: true})
		require.NoError(t, err)
		checkSame(t, src, dst)
		require.Equal(t, st.DataBytes, st.ClonedBytes+st.CopiedBytes)
		b := make([]byte, 8192)
		layout.Pattern(b, 12345)
		f, err := os.OpenFile(src, os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt(b, l.Data[0].Off)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		st, err = localsync.Copy(t.Context(), src, dst, &localsync.Options{Atomic: true})
		require.NoError(t, err)
		checkSame(t, src, dst)
		if kind.Reflink() {
			require.Equal(t, int64(8192), st.ClonedBytes+st.CopiedBytes, "%+v", st)
		} else {
			require.Equal(t, st.DataBytes, st.ClonedBytes+st.CopiedBytes, "%+v", st)
		}
		requireNoTemp(t, dir)
	})
}

// TestDetectZeros turns zero blocks inside data extents into holes, in a
// full copy and when re-syncing over data.
func TestDetectZeros(t *testing.T) {
	dir := loopfs.Mount(t, loopfs.Ext4, gib)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	layout.Create(t, src, layout.Layout{Name: "z", Size: 16 * mib, Data: layout.Ranges(0, 4*mib)})
	f, err := os.OpenFile(src, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, mib), mib) // zeros written as data
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Equal(t, layout.Ranges(0, 4*mib), layout.SeekWalk(t, src))

	st, err := localsync.Copy(t.Context(), src, dst, &localsync.Options{DetectZeros: true})
	require.NoError(t, err)
	require.Equal(t, layout.Ranges(0, mib, 2*mib, 2*mib), layout.SeekWalk(t, dst))
	require.Equal(t, mib, st.ZeroBytes)
	require.Equal(t, 3*mib, st.CopiedBytes)
	compareRanges(t, src, dst, layout.Ranges(0, 16*mib))

	// Over a destination that has data where the source has zeros.
	require.NoError(t, os.Remove(dst))
	_, err = localsync.Copy(t.Context(), src, dst, nil)
	require.NoError(t, err)
	st, err = localsync.Copy(t.Context(), src, dst, &localsync.Options{DetectZeros: true})
	require.NoError(t, err)
	require.Equal(t, layout.Ranges(0, mib, 2*mib, 2*mib), layout.SeekWalk(t, dst))
	require.Equal(t, mib, st.PunchedBytes)
	require.Equal(t, mib, st.ZeroBytes)
	checkStatsAdd(t, st)
}

// requireNoTemp asserts that dir holds no temporary file of an atomic copy.
func requireNoTemp(t *testing.T, dir string) {
	t.Helper()
	tmps, err := filepath.Glob(filepath.Join(dir, ".*.sparsesync-*"))
	require.NoError(t, err)
	require.Empty(t, tmps, "temporary file left behind")
}

// TestColdResync re-syncs with both files out of the page cache: the
// comparison reads them with O_DIRECT (DirectReadBytes), the result is
// identical and only the changed blocks are written; ranges under
// directMin are still read through the cache. A second re-sync with
// the files cached reads through the cache. The source's last block is
// partial (size not a multiple of 4 KiB), so the direct read past the end
// of the file is exercised too.
func TestColdResync(t *testing.T) {
	runAll(t, gib, func(t *testing.T, kind loopfs.Kind, dir string) {
		l := scattered("cold", 64*mib, 30, 21)
		l.Size += mib + 1000
		l.Data = append(l.Data, layout.Range{Off: l.Size - 5000, Len: 5000})
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		layout.Create(t, src, l)
		_, err := localsync.Copy(t.Context(), src, dst, &localsync.Options{Reflink: localsync.ReflinkNever})
		require.NoError(t, err)

		f, err := os.OpenFile(src, os.O_RDWR, 0)
		require.NoError(t, err)
		rewriteBlocks(t, f, l.Data[:len(l.Data)-1], 20, rand.New(rand.NewPCG(7, 7)))
		tail := []byte("the last partial block changed")
		_, err = f.WriteAt(tail, l.Size-int64(len(tail)))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		dropCache(t, src)
		dropCache(t, dst)

		// Reflink never: the cold comparison is what is tested, also where a
		// re-sync would clone (TestResyncByCloning).
		st, err := localsync.Copy(t.Context(), src, dst, &localsync.Options{Reflink: localsync.ReflinkNever})
		require.NoError(t, err)
		checkSame(t, src, dst)
		checkStatsAdd(t, st)
		// 20 random blocks and the last one (1000 bytes into a 4 KiB block).
		require.Equal(t, int64(20*4096+1000), st.CopiedBytes, "%+v", st)
		if kind != loopfs.Tmpfs { // tmpfs pages are the storage: always cached
			require.Greater(t, st.DirectReadBytes, st.DataBytes, "cold data is read directly from both files: %+v", st)
		}

		// Warm: everything was just read through the cache by checkSame.
		st, err = localsync.Copy(t.Context(), src, dst, &localsync.Options{Reflink: localsync.ReflinkNever})
		require.NoError(t, err)
		require.Zero(t, st.CopiedBytes+st.ClonedBytes+st.PunchedBytes, "%+v", st)
		require.Zero(t, st.DirectReadBytes, "cached data is read through the cache: %+v", st)

		// Small extents are read through the cache even when cold: its
		// readahead merges neighbours into large disk reads.
		small := layout.Layout{Name: "small", Size: 2000 * 8192}
		for i := range int64(2000) {
			small.Data = append(small.Data, layout.Range{Off: i * 8192, Len: 4096})
		}
		a, b := filepath.Join(dir, "small-a"), filepath.Join(dir, "small-b")
		layout.Create(t, a, small)
		_, err = localsync.Copy(t.Context(), a, b, &localsync.Options{Reflink: localsync.ReflinkNever})
		require.NoError(t, err)
		dropCache(t, a)
		dropCache(t, b)
		st, err = localsync.Copy(t.Context(), a, b, &localsync.Options{Reflink: localsync.ReflinkNever})
		require.NoError(t, err)
		require.Equal(t, small.DataBytes(), st.UnchangedBytes, "%+v", st)
		require.Zero(t, st.DirectReadBytes, "%+v", st)
	})
}

// dropCache writes path's dirty pages and drops its cached ones.
func dropCache(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Sync())
	require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
}

// rewriteBlocks writes n distinct random 4 KiB blocks of new random bytes
// (never all zeros) inside the data ranges in.
func rewriteBlocks(t *testing.T, f *os.File, in []layout.Range, n int, r *rand.Rand) {
	t.Helper()
	changed := map[int64]bool{}
	b := make([]byte, 4096)
	for len(changed) < n {
		d := in[r.IntN(len(in))]
		blk := d.Off + r.Int64N(d.Len/4096)*4096
		if changed[blk] {
			continue
		}
		changed[blk] = true
		for i := range b {
			b[i] = byte(r.Uint32()) | 1
		}
		_, err := f.WriteAt(b, blk)
		require.NoError(t, err)
	}
}
