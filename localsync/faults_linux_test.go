package localsync_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
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
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src.img"), filepath.Join(dir, "dst.img")
			layout.Create(t, src, layout.Layout{Size: 4 << 20, Data: layout.Ranges(0, 64<<10, 1<<20, 64<<10, 3<<20, 64<<10)})
			var old []byte
			if tc.opts.Atomic {
				old = []byte("the old version")
				require.NoError(t, os.WriteFile(dst, old, 0o600))
			}
			faults := target.NewFaults(tc.fault)
			o := tc.opts
			localsync.SetFaults(&o, faults)
			_, err := localsync.Copy(t.Context(), src, dst, &o)
			require.ErrorIs(t, err, tc.fault.Err)
			require.Equal(t, 1, faults.Hits())
			if old == nil {
				require.NoFileExists(t, dst, "a new destination is removed")
			} else {
				require.Equal(t, old, fileBytes(t, dst), "the old destination is untouched")
			}
			want := []string{"src.img"}
			if old != nil {
				want = append([]string{"dst.img"}, want...)
			}
			left, err := os.ReadDir(dir)
			require.NoError(t, err)
			var names []string
			for _, e := range left {
				names = append(names, e.Name())
			}
			require.Equal(t, want, names, "no temporary file stays")
		})
	}
}
