package localsync_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
)

// TestUnwrittenAsHoles copies a source with preallocated (unwritten)
// space: a range whose zero pages are cached (SEEK_DATA may call it data)
// becomes a hole in the copy; a preallocated range written but not yet
// flushed (dirty pages, FIEMAP still unwritten or delalloc) is copied.
func TestUnwrittenAsHoles(t *testing.T) {
	runAll(t, gib, func(t *testing.T, kind loopfs.Kind, dir string) {
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		f, err := os.Create(src)
		require.NoError(t, err)
		defer f.Close()
		require.NoError(t, f.Truncate(8*mib))
		data := bytes.Repeat([]byte{0x3c}, int(mib))
		_, err = f.WriteAt(data, 0)
		require.NoError(t, err)
		require.NoError(t, unix.Fallocate(int(f.Fd()), 0, 2*mib, 4*mib))
		require.NoError(t, f.Sync())
		// Cache the zeros of [2, 4) MiB, then write [4, 5) MiB unflushed.
		_, err = f.ReadAt(make([]byte, 2*mib), 2*mib)
		require.NoError(t, err)
		_, err = f.WriteAt(data, 4*mib)
		require.NoError(t, err)

		st, err := localsync.Copy(t.Context(), src, dst, &localsync.Options{Reflink: localsync.ReflinkNever})
		require.NoError(t, err)
		want := make([]byte, 8*mib)
		copy(want, data)
		copy(want[4*mib:], data)
		require.Equal(t, want, fileBytes(t, dst))
		if kind == loopfs.Tmpfs {
			return // no FIEMAP: preallocated pages are data there
		}
		syncFile(t, dst)
		for _, r := range layout.SeekWalk(t, dst) {
			require.False(t, r.Off < 4*mib && r.End() > 2*mib,
				"copy has data %v in the unwritten range [2, 4) MiB (%+v)", r, st)
		}
		require.Equal(t, 2*mib, st.CopiedBytes, "%+v", st)
	})
}
