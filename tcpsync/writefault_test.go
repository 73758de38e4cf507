package tcpsync

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	wtarget "github.com/sparsesync/sparsesync/internal/target"
)

// TestSyncWriteFaultsLeaveNothingComplete: a push whose target fails on
// the server, or a pull whose target fails on the client (EIO on fdatasync
// or fsync, ENOSPC on a write), fails with the receiver's reason, and
// leaves no target that looks complete: none, or one its sidecar marks
// incomplete.
func TestSyncWriteFaultsLeaveNothingComplete(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  wtarget.Fault
		atomic bool
	}{
		{"in place/EIO on fdatasync", wtarget.Fault{Op: wtarget.OpFdatasync, Err: syscall.EIO}, false},
		{"in place/ENOSPC on write", wtarget.Fault{Op: wtarget.OpWrite, N: 2, Err: syscall.ENOSPC}, false},
		{"atomic/EIO on fsync", wtarget.Fault{Op: wtarget.OpFsync, Err: syscall.EIO}, true},
		{"atomic/ENOSPC on write", wtarget.Fault{Op: wtarget.OpWrite, N: 2, Err: syscall.ENOSPC}, true},
	} {
		for _, pull := range []bool{false, true} {
			name := "push/" + tc.name
			if pull {
				name = "pull/" + tc.name
			}
			t.Run(name, func(t *testing.T) {
				root, local := t.TempDir(), t.TempDir()
				faults := wtarget.NewFaults(tc.fault)
				addr, _ := startServer(t, root, func(s *Server) {
					if !pull {
						s.faults = faults
					}
				})
				o := clientOpts()
				o.Atomic = tc.atomic
				var dst string
				var err error
				if pull {
					require.NoError(t, writeImage(filepath.Join(root, "vm.img"), 8<<20, 0.5, 6, 11))
					o.faults = faults
					dst = filepath.Join(local, "vm.img")
					_, err = Pull(t.Context(), addr, "vm.img", dst, o)
				} else {
					src := filepath.Join(local, "src")
					require.NoError(t, writeImage(src, 8<<20, 0.5, 6, 11))
					dst = filepath.Join(root, "vm.img")
					_, err = PushFile(t.Context(), addr, src, "vm.img", o)
					require.ErrorIs(t, err, ErrRemote)
				}
				require.ErrorContains(t, err, tc.fault.Err.Error(), "the receiver's reason")
				require.NotZero(t, faults.Hits())
				if _, serr := os.Stat(dst); serr == nil {
					require.Equal(t, stateIncomplete, readSidecar(t, dst).State, "a target left behind is marked incomplete")
				} else {
					require.ErrorIs(t, serr, os.ErrNotExist)
				}
			})
		}
	}
}
