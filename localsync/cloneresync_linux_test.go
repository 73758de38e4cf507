package localsync_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
	"github.com/sparsesync/sparsesync/sparse"
)

// physical maps each 4 KiB block of path's data to its address on the
// device, from the kernel's extent map (FIEMAP).
func physical(t *testing.T, path string) map[int64]int64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Sync())
	m := map[int64]int64{}
	require.NoError(t, sparse.Fiemap(t.Context(), f, 0, 1<<62, func(e sparse.FiemapExtent) error {
		for o := int64(0); o < e.Length; o += 4096 {
			m[e.Logical+o] = e.Physical + o
		}
		return nil
	}))
	return m
}

// TestResyncByCloning re-syncs an independent copy on XFS and btrfs: with
// reflink auto, the destination's long data ranges become the source's
// blocks (the kernel's extent map shows every data block of the
// destination at the source's physical address), nothing is read or
// written, and the result is exact; short changed ranges are compared and
// written. The next re-sync finds everything shared and does nothing.
// With reflink never, the same re-sync compares and writes only what
// differs.
func TestResyncByCloning(t *testing.T) {
	for _, kind := range []loopfs.Kind{loopfs.XFS, loopfs.Btrfs} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			dir := loopfs.Mount(t, kind, gib)
			src, dst, never := filepath.Join(dir, "src"), filepath.Join(dir, "dst"), filepath.Join(dir, "never")
			r := rand.New(rand.NewPCG(9, 9))
			f, err := os.Create(src)
			require.NoError(t, err)
			require.NoError(t, f.Truncate(64*mib))
			long := []struct{ off, n int64 }{{0, 4 * mib}, {10 * mib, 8 * mib}, {40 * mib, mib}}
			short := int64(50 * mib) // one 4 KiB extent: compared, not cloned
			buf := make([]byte, 8*mib)
			var data int64
			for _, x := range long {
				for i := range buf[:x.n] {
					buf[i] = byte(r.Uint32() | 1)
				}
				_, err := f.WriteAt(buf[:x.n], x.off)
				require.NoError(t, err)
				data += x.n
			}
			_, err = f.WriteAt(bytes.Repeat([]byte{7}, 4096), short)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			copiesWithoutSharing(t, src, dst, never)

			// Change one block inside a long extent and the short one.
			g, err := os.OpenFile(src, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = g.WriteAt([]byte("changed inside a long extent"), 12*mib+100)
			require.NoError(t, err)
			_, err = g.WriteAt([]byte("changed short"), short)
			require.NoError(t, err)
			require.NoError(t, g.Close())

			st, err := localsync.Copy(t.Context(), src, dst, nil)
			require.NoError(t, err)
			checkSame(t, src, dst)
			checkStatsAdd(t, st)
			require.Equal(t, data, st.ClonedBytes, "every long range cloned: %+v", st)
			require.Equal(t, int64(4096), st.CopiedBytes, "the short range compared and written: %+v", st)
			require.Zero(t, st.DirectReadBytes, "the long ranges were not read: %+v", st)
			ps, pd := physical(t, src), physical(t, dst)
			for _, x := range long {
				for o := x.off; o < x.off+x.n; o += 4096 {
					require.Equal(t, ps[o], pd[o], "block %d of the destination is not the source's block", o)
				}
			}
			require.NotEqual(t, ps[short], pd[short], "the short range was written, not cloned")

			st, err = localsync.Copy(t.Context(), src, dst, nil)
			require.NoError(t, err)
			require.Zero(t, st.ClonedBytes+st.CopiedBytes+st.PunchedBytes, "unchanged re-sync: %+v", st)

			resyncNeverWritesOnly(t, src, never, 2*4096)
		})
	}
}

// TestResyncManyExtentsIsOneClone re-syncs an independent copy of a file of
// many small extents (more than the windows would clone range by range, so
// they would compare them all) on XFS and btrfs: with reflink auto the
// destination is made as a new copy is, one whole-file clone. Nothing is
// read or written, every data block of the destination is the source's
// block (FIEMAP), data the destination had where the source has a hole is
// gone, and the bytes and hole map are the source's; the next re-sync finds
// every block shared and does nothing. With reflink never the
// same re-sync still compares and writes only the changed blocks.
func TestResyncManyExtentsIsOneClone(t *testing.T) {
	for _, kind := range []loopfs.Kind{loopfs.XFS, loopfs.Btrfs} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			dir := loopfs.Mount(t, kind, gib)
			src, dst, never := filepath.Join(dir, "src"), filepath.Join(dir, "dst"), filepath.Join(dir, "never")
			const extents = 2048 // 4 KiB every 16 KiB: all short
			f, err := os.Create(src)
			require.NoError(t, err)
			require.NoError(t, f.Truncate(extents*16<<10))
			for i := range int64(extents) {
				_, err := f.WriteAt(bytes.Repeat([]byte{byte(i) | 1}, 4096), i*16<<10)
				require.NoError(t, err)
			}
			require.NoError(t, f.Close())
			copiesWithoutSharing(t, src, dst, never)
			// Change 21 of the source's blocks; give the destination data
			// in one of the source's holes.
			g, err := os.OpenFile(src, os.O_WRONLY, 0)
			require.NoError(t, err)
			changed := int64(0)
			for i := int64(0); i < extents; i += extents / 20 {
				_, err := g.WriteAt([]byte("changed"), i*16<<10+9)
				require.NoError(t, err)
				changed++
			}
			require.NoError(t, g.Close())
			h, err := os.OpenFile(dst, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = h.WriteAt(bytes.Repeat([]byte{0xee}, 4096), 8<<10)
			require.NoError(t, err)
			require.NoError(t, h.Close())

			st, err := localsync.Copy(t.Context(), src, dst, nil)
			require.NoError(t, err)
			checkSame(t, src, dst)
			checkStatsAdd(t, st)
			require.Equal(t, int64(extents*4096), st.ClonedBytes, "every extent cloned: %+v", st)
			require.Zero(t, st.CopiedBytes+st.DirectReadBytes, "nothing read or written: %+v", st)
			ps, pd := physical(t, src), physical(t, dst)
			for i := range int64(extents) {
				o := i * 16 << 10
				require.Equal(t, ps[o], pd[o], "block %d of the destination is not the source's block", o)
			}
			// Now everything is shared: the next re-sync does nothing.
			st, err = localsync.Copy(t.Context(), src, dst, &localsync.Options{FullCompare: true})
			require.NoError(t, err)
			require.Zero(t, st.ClonedBytes+st.CopiedBytes+st.PunchedBytes, "unchanged re-sync: %+v", st)

			resyncNeverWritesOnly(t, src, never, changed*4096)
		})
	}
}

// copiesWithoutSharing makes each of dsts an independent copy of src
// (reflink never): no block shared with it.
func copiesWithoutSharing(t *testing.T, src string, dsts ...string) {
	t.Helper()
	for _, d := range dsts {
		_, err := localsync.Copy(t.Context(), src, d, &localsync.Options{Reflink: localsync.ReflinkNever})
		require.NoError(t, err)
	}
}

// resyncNeverWritesOnly re-syncs never from src with reflink never and
// checks it is exact, cloned nothing and wrote exactly changed bytes.
func resyncNeverWritesOnly(t *testing.T, src, never string, changed int64) {
	t.Helper()
	st, err := localsync.Copy(t.Context(), src, never, &localsync.Options{Reflink: localsync.ReflinkNever})
	require.NoError(t, err)
	checkSame(t, src, never)
	require.Zero(t, st.ClonedBytes, "%+v", st)
	require.Equal(t, changed, st.CopiedBytes, "reflink never writes only the changed blocks: %+v", st)
}
