package target

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFaults: each row is one injected failure, and what the caller and
// the disk must show after it. The old destination holds "old!" (4
// bytes); the copy writes 8 KiB of 'n' at 0, punches [8 KiB, 12 KiB) and
// commits with sync.
func TestFaults(t *testing.T) {
	for _, c := range []struct {
		name    string
		atomic  bool
		fault   Fault
		wantErr error
		want    string // the destination's first bytes after the failure
	}{
		{"short write", false, Fault{Op: OpWrite, Short: 100}, io.ErrShortWrite, "nnnn"},
		{"short write ENOSPC", false, Fault{Op: OpWrite, Short: 3, Err: syscall.ENOSPC}, syscall.ENOSPC, "nnn!"},
		{"EIO on fdatasync", false, Fault{Op: OpFdatasync}, syscall.EIO, "nnnn"},
		{"ENOSPC on truncate", false, Fault{Op: OpTruncate, Err: syscall.ENOSPC}, syscall.ENOSPC, "old!"},
		{"EIO on punch", false, Fault{Op: OpPunch}, syscall.EIO, "nnnn"},
		{"second write only", false, Fault{Op: OpWrite, N: 2, Err: syscall.ENOSPC}, syscall.ENOSPC, "nnnn"},
		{"atomic EIO on fsync", true, Fault{Op: OpFsync}, syscall.EIO, "old!"},
		{"atomic ENOSPC on rename", true, Fault{Op: OpRename, Err: syscall.ENOSPC}, syscall.ENOSPC, "old!"},
		{"atomic short write", true, Fault{Op: OpWrite, Short: 1}, io.ErrShortWrite, "old!"},
		{"path matches", false, Fault{Op: OpWrite, Path: "d*", Err: syscall.EROFS}, syscall.EROFS, "old!"},
		{"other path", false, Fault{Op: OpWrite, Path: "other"}, nil, "nnnn"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "dst")
			require.NoError(t, os.WriteFile(dst, []byte("old!"), 0o644))
			faults := NewFaults(c.fault)
			err := copyWith(dst, Options{Atomic: c.atomic, Faults: faults})
			if c.wantErr == nil {
				require.NoError(t, err)
				require.Zero(t, faults.Hits())
			} else {
				require.ErrorIs(t, err, c.wantErr)
				require.Equal(t, 1, faults.Hits())
			}
			got, rerr := os.ReadFile(dst)
			require.NoError(t, rerr)
			require.Equal(t, c.want, string(got[:4]))
			if c.atomic {
				left, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), ".dst.sparsesync-*"))
				require.Empty(t, left, "temporary file left")
			}
		})
	}
}

// TestFaultsNewFileCommit: a new destination whose commit fails on
// fdatasync is removed, as Abort would: its data may not be durable.
func TestFaultsNewFileCommit(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "dst")
	require.ErrorIs(t, copyWith(dst, Options{Faults: NewFaults(Fault{Op: OpFdatasync})}), syscall.EIO)
	require.NoFileExists(t, dst)
}

// copyWith is a caller's copy: size, write in two pieces, punch, commit;
// on any failure it aborts, as localsync and tcpsync do.
func copyWith(dst string, o Options) error {
	f, err := Create(dst, &o)
	if err != nil {
		return err
	}
	err = f.SetSize(12 << 10)
	if err == nil {
		_, err = f.WriteAt(bytes.Repeat([]byte("n"), 4096), 0)
	}
	if err == nil {
		_, err = f.WriteAt(bytes.Repeat([]byte("n"), 4096), 4096)
	}
	if err == nil {
		_, err = f.Zero(8<<10, 4<<10)
	}
	if err == nil {
		if err = f.Sync(); err == nil || o.Atomic {
			err = f.Commit(true)
		}
	}
	if err != nil {
		f.Abort()
	}
	return err
}

// TestFaultsSidecar: a caller's own file next to the destination fails
// through the same injector, on its name only.
func TestFaultsSidecar(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "dst")
	f, err := Create(dst, &Options{Faults: NewFaults(Fault{Op: OpSidecarWrite, Path: "*.sidecar", Err: syscall.ENOSPC})})
	require.NoError(t, err)
	defer f.Abort()
	require.NoError(t, f.Inject(OpSidecarWrite, "dst.other"))
	require.ErrorIs(t, f.Inject(OpSidecarWrite, "dst.sidecar"), syscall.ENOSPC)
	require.NoError(t, f.Inject(OpWrite, "dst.sidecar"))
	var none *File
	require.NoError(t, none.Inject(OpSidecarWrite, "dst.sidecar"))
}

// TestFsyncFaults: Fsync fails with the injected error named as an fsync
// of the file (a PathError whose Err is the errno), and a Delay alone only
// slows it.
func TestFsyncFaults(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(filepath.Join(dir, "img"), &Options{Faults: NewFaults(
		Fault{Op: OpFsync, N: 1, Err: syscall.EIO},
		Fault{Op: OpFsync, N: 1, Delay: 50 * time.Millisecond}, // counts the calls rule 1 passes on
	)})
	require.NoError(t, err)
	defer f.Abort()
	err = f.Fsync()
	require.ErrorIs(t, err, syscall.EIO)
	require.Contains(t, err.Error(), "fsync")
	start := time.Now()
	require.NoError(t, f.Fsync(), "a delay alone")
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	require.NoError(t, f.Fsync())
}
