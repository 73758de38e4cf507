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
			for _, d := range []string{dst, never} {
				_, err := localsync.Copy(t.Context(), src, d, &localsync.Options{Reflink: localsync.ReflinkNever})
				require.NoError(t, err)
			}

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

			st, err = localsync.Copy(t.Context(), src, never, &localsync.Options{Reflink: localsync.ReflinkNever})
			require.NoError(t, err)
			checkSame(t, src, never)
			require.Zero(t, st.ClonedBytes, "%+v", st)
			require.Equal(t, int64(2*4096), st.CopiedBytes, "reflink never writes only the two changed blocks: %+v", st)
		})
	}
}
