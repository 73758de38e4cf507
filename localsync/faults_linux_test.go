package localsync_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
)

// TestWriteSideFaultsLeaveNothingComplete: a copy whose destination fails
// (EIO on fdatasync or fsync, ENOSPC on a write) returns that error and
// leaves no destination that looks complete: a new one is removed, an
// atomic copy keeps the old one as it was, and no temporary file stays.
func TestWriteSideFaultsLeaveNothingComplete(t *testing.T) {
	rw := localsync.MethodReadWrite // the only method whose writes go through target's WriteAt
	for _, tc := range []struct {
		name  string
		fault target.Fault
		opts  localsync.Options
	}{
		{"in place/EIO on fdatasync", target.Fault{Op: target.OpFdatasync, Err: syscall.EIO}, localsync.Options{}},
		{"in place/ENOSPC on write", target.Fault{Op: target.OpWrite, N: 2, Err: syscall.ENOSPC}, localsync.Options{Method: rw}},
		{"atomic/EIO on fsync", target.Fault{Op: target.OpFsync, Err: syscall.EIO}, localsync.Options{Atomic: true}},
		{"atomic/ENOSPC on write", target.Fault{Op: target.OpWrite, N: 2, Err: syscall.ENOSPC}, localsync.Options{Atomic: true, Method: rw}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			faults := target.NewFaults(tc.fault)
			o := tc.opts
			localsync.SetFaults(&o, faults)
			requireFailsCleanly(t, t.TempDir(), &o, tc.fault.Err)
			require.Equal(t, 1, faults.Hits())
		})
	}
}

// TestKernelCopyFaultsLeaveNothingComplete: ENOSPC and EIO on the kernel's
// copies into the destination (FICLONE, FICLONERANGE, copy_file_range),
// injected through internal/target's Faults, fail the copy with an error
// naming the destination, leave the source as it was and no destination
// that looks complete. On XFS, where all three run.
func TestKernelCopyFaultsLeaveNothingComplete(t *testing.T) {
	mnt := loopfs.Mount(t, loopfs.XFS, 512<<20)
	cfr := localsync.MethodCopyRange
	// firstShort lets the first copy_file_range copy 4 KiB for real.
	firstShort := target.Fault{Op: target.OpCopyRange, N: 1, Short: 4096}
	for _, tc := range []struct {
		name   string
		faults []target.Fault
		opts   localsync.Options
		err    error
	}{
		{"in place/ENOSPC on ficlone", []target.Fault{{Op: target.OpClone, Err: syscall.ENOSPC}}, localsync.Options{}, syscall.ENOSPC},
		{"atomic/ENOSPC on ficlone of the old version", []target.Fault{{Op: target.OpClone, Err: syscall.ENOSPC}}, localsync.Options{Atomic: true}, syscall.ENOSPC},
		{"atomic/EIO on ficlonerange", []target.Fault{{Op: target.OpCloneRange, Err: syscall.EIO}}, localsync.Options{Atomic: true}, syscall.EIO},
		{"in place/ENOSPC on copy_file_range", []target.Fault{{Op: target.OpCopyRange, Err: syscall.ENOSPC}}, localsync.Options{Method: cfr}, syscall.ENOSPC},
		{"in place/EIO on copy_file_range after data", []target.Fault{firstShort, {Op: target.OpCopyRange, Err: syscall.EIO}}, localsync.Options{Method: cfr}, syscall.EIO},
		{"atomic/ENOSPC on copy_file_range after data", []target.Fault{firstShort, {Op: target.OpCopyRange, Err: syscall.ENOSPC}}, localsync.Options{Atomic: true, Method: cfr}, syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(mnt, strings.NewReplacer("/", "-", " ", "-").Replace(tc.name))
			require.NoError(t, os.Mkdir(dir, 0o700))
			faults := target.NewFaults(tc.faults...)
			o := tc.opts
			localsync.SetFaults(&o, faults)
			requireFailsCleanly(t, dir, &o, tc.err)
			require.Positive(t, faults.Hits())
		})
	}
}

// requireFailsCleanly copies a new src.img in dir to dst.img (an existing
// one in atomic mode) with o, and checks that the copy fails with want and
// an error naming the destination, that the source is unchanged, and that
// nothing looks complete: a new destination is removed, an atomic copy
// keeps the old one as it was, and no temporary file stays.
func requireFailsCleanly(t *testing.T, dir string, o *localsync.Options, want error) {
	t.Helper()
	src, dst := filepath.Join(dir, "src.img"), filepath.Join(dir, "dst.img")
	layout.Create(t, src, layout.Layout{Size: 4 << 20, Data: layout.Ranges(0, 64<<10, 1<<20, 64<<10, 3<<20, 64<<10)})
	srcBefore, srcMap := fileBytes(t, src), layout.SeekWalk(t, src)
	var old []byte
	if o.Atomic {
		old = []byte("the old version")
		require.NoError(t, os.WriteFile(dst, old, 0o600))
	}
	_, err := localsync.Copy(t.Context(), src, dst, o)
	require.ErrorIs(t, err, want)
	require.Contains(t, err.Error(), dst, "the error names the destination")
	require.Equal(t, srcBefore, fileBytes(t, src), "the source is untouched")
	require.Equal(t, srcMap, layout.SeekWalk(t, src), "the source's holes are untouched")
	if old == nil {
		require.NoFileExists(t, dst, "a new destination is removed")
	} else {
		require.Equal(t, old, fileBytes(t, dst), "the old destination is untouched")
	}
	stay := []string{"src.img"}
	if old != nil {
		stay = append([]string{"dst.img"}, stay...)
	}
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	require.Equal(t, stay, names, "no temporary file stays")
}
