package target

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/kcopy"
)

// TestKernelCopyFaults: a File's Faults reach each system call of the
// kernel copies into it, and internal/kcopy sorts an injected errno as it
// would the real one. The source is 64 KiB of 's'; the destination starts
// empty and 64 KiB long.
func TestKernelCopyFaults(t *testing.T) {
	const n = 64 << 10
	data := bytes.Repeat([]byte{'s'}, n)
	open := func(t *testing.T, rules ...Fault) (*os.File, *File, *Faults) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "src"), data, 0o600))
		src, err := os.Open(filepath.Join(dir, "src"))
		require.NoError(t, err)
		t.Cleanup(func() { src.Close() })
		f := NewFaults(rules...)
		dst, err := Create(filepath.Join(dir, "dst"), &Options{Faults: f})
		require.NoError(t, err)
		t.Cleanup(func() { dst.Abort() })
		require.NoError(t, dst.SetSize(n))
		return src, dst, f
	}
	written := func(t *testing.T, dst *File) []byte {
		b, err := os.ReadFile(dst.Name())
		require.NoError(t, err)
		return b
	}
	t.Run("EINTR is retried", func(t *testing.T) {
		src, dst, f := open(t, Fault{Op: OpCopyRange, N: 1, Err: syscall.EINTR})
		done, handled, err := kcopy.CopyRange(t.Context(), src, dst, 0, n)
		if !handled {
			t.Skipf("copy_file_range not handled here: %v", err)
		}
		require.NoError(t, err)
		require.Equal(t, int64(n), done)
		require.Equal(t, data, written(t, dst))
		require.Equal(t, 2, f.Calls(OpCopyRange), "the interrupted call, then the real one")
	})
	t.Run("io.EOF copies nothing: not handled", func(t *testing.T) {
		src, dst, _ := open(t, Fault{Op: OpCopyRange, Err: io.EOF})
		done, handled, err := kcopy.CopyRange(t.Context(), src, dst, 0, n)
		require.NoError(t, err)
		require.False(t, handled)
		require.Zero(t, done)
		require.Equal(t, make([]byte, n), written(t, dst))
	})
	t.Run("EIO after a short copy stops", func(t *testing.T) {
		src, dst, f := open(t, Fault{Op: OpCopyRange, N: 1, Short: 4096}, Fault{Op: OpCopyRange, Err: syscall.EIO})
		done, handled, err := kcopy.CopyRange(t.Context(), src, dst, 0, n)
		if f.Calls(OpCopyRange) == 1 && !handled {
			t.Skipf("copy_file_range not handled here: %v", err)
		}
		require.True(t, handled)
		require.ErrorIs(t, err, kcopy.ErrPartial)
		require.ErrorIs(t, err, syscall.EIO)
		require.Equal(t, int64(4096), done)
		got := written(t, dst)
		require.Equal(t, data[:4096], got[:4096])
		require.Equal(t, make([]byte, n-4096), got[4096:], "written past the short copy")
	})
	for _, c := range []struct {
		errno   error
		handled bool
	}{{syscall.ENOSPC, true}, {syscall.EIO, true}, {syscall.EXDEV, false}, {syscall.EOPNOTSUPP, false}} {
		t.Run("clone "+c.errno.Error(), func(t *testing.T) {
			src, dst, f := open(t, Fault{Op: OpClone, Err: c.errno}, Fault{Op: OpCloneRange, Err: c.errno})
			handled, err := dst.Clone(src)
			require.Equal(t, c.handled, handled)
			require.ErrorIs(t, err, c.errno)
			handled, err = dst.CloneRange(src, 0, 4096)
			require.Equal(t, c.handled, handled)
			require.ErrorIs(t, err, c.errno)
			require.Equal(t, 2, f.Hits())
			require.Equal(t, make([]byte, n), written(t, dst))
		})
	}
	t.Run("When off", func(t *testing.T) {
		on := false
		src, dst, f := open(t, Fault{Op: OpClone, Err: syscall.ENOSPC, When: func() bool { return on }})
		_, err := dst.Clone(src)
		require.NotErrorIs(t, err, syscall.ENOSPC)
		on = true
		_, err = dst.Clone(src)
		require.ErrorIs(t, err, syscall.ENOSPC)
		require.Equal(t, 1, f.Hits())
		require.Equal(t, 2, f.Calls(OpClone))
	})
}
