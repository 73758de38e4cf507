package localsync_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
	"github.com/sparsesync/sparsesync/sparse"
)

// TestBlockSize64K runs a re-sync and a zero-detecting copy with
// Options.BlockSize 64 KiB. Holes are exact to the filesystem block, not
// to the comparison block: a 4 KiB hole punched inside a 64 KiB block is
// punched in the copy. A change is written as whole comparison blocks, and
// zero detection leaves holes only for all-zero 64 KiB blocks.
func TestBlockSize64K(t *testing.T) {
	const bs = 64 * kib
	runAll(t, gib, func(t *testing.T, kind loopfs.Kind, dir string) {
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		l := layout.Layout{Name: "bs64k", Size: 16 * mib, Data: layout.Ranges(0, 8*mib, 12*mib, 2*mib)}
		layout.Create(t, src, l)
		// No reflink: shared blocks would be skipped unread at the
		// filesystem's 4 KiB, and the comparison block would not show.
		_, err := localsync.Copy(t.Context(), src, dst, &localsync.Options{BlockSize: bs, Reflink: localsync.ReflinkNever})
		require.NoError(t, err)
		checkSame(t, src, dst)

		f, err := os.OpenFile(src, os.O_RDWR, 0)
		require.NoError(t, err)
		defer f.Close()
		// A 4 KiB hole inside a 64 KiB block, a whole-block hole of 128
		// KiB, and one 4 KiB block rewritten.
		_, err = sparse.PunchHole(f, bs+4*kib, 4*kib)
		require.NoError(t, err)
		_, err = sparse.PunchHole(f, 4*bs, 2*bs)
		require.NoError(t, err)
		_, err = f.WriteAt(bytes.Repeat([]byte{0x77}, 4096), 12*mib+3*bs+8*kib)
		require.NoError(t, err)

		// Reflink never: the comparison at 64 KiB is what is tested, also
		// where a re-sync would clone (TestResyncByCloning).
		st, err := localsync.Copy(t.Context(), src, dst, &localsync.Options{BlockSize: bs, Reflink: localsync.ReflinkNever})
		require.NoError(t, err)
		checkSame(t, src, dst)
		checkStatsAdd(t, st)
		require.Equal(t, 4*kib+2*bs, st.PunchedBytes+st.ZeroedBytes, "%+v", st)
		require.Equal(t, bs, st.CopiedBytes+st.ClonedBytes, "one changed 64 KiB block: %+v", st)

		// Zero detection at 64 KiB: an all-zero 64 KiB block becomes a
		// hole; 4 KiB of zeros inside a non-zero block stays data.
		zsrc, zdst := filepath.Join(dir, "zsrc"), filepath.Join(dir, "zdst")
		b := make([]byte, 4*bs)
		layout.Pattern(b, 0)
		clear(b[bs : 2*bs])               // block 1: all zeros
		clear(b[2*bs+4*kib : 2*bs+8*kib]) // block 2: 4 KiB of zeros
		require.NoError(t, os.WriteFile(zsrc, b, 0o644))
		st, err = localsync.Copy(t.Context(), zsrc, zdst, &localsync.Options{BlockSize: bs, DetectZeros: true})
		require.NoError(t, err)
		require.Equal(t, b, fileBytes(t, zdst))
		require.Equal(t, bs, st.ZeroBytes, "%+v", st)
		syncFile(t, zdst)
		require.Equal(t, layout.Ranges(0, bs, 2*bs, 2*bs), layout.SeekWalk(t, zdst), "holes of %s", zdst)
	})
}
