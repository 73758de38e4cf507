package tcpsync

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	wtarget "github.com/sparsesync/sparsesync/internal/target"
)

// TestSidecarENOSPC: a sidecar write that fails with ENOSPC is an error
// naming the target, leaves no sidecar and no temporary file, and does
// not mark the target; the next write succeeds.
func TestSidecarENOSPC(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	tg, err := openTarget(root, "vm.img", "vm.img", false, nil)
	require.NoError(t, err)
	defer tg.close()
	faults := wtarget.NewFaults(wtarget.Fault{Op: wtarget.OpSidecarWrite, Path: "*" + sidecarSuffix, N: 1, Err: syscall.ENOSPC})
	tg.w.SetFaults(faults)

	err = tg.saveSidecar(&sidecar{State: "incomplete", Size: 4096, BlockSize: 4096})
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.ErrorContains(t, err, "sidecar of vm.img")
	require.False(t, tg.marked)
	left, _ := filepath.Glob(filepath.Join(dir, "*"+sidecarSuffix+"*"))
	require.Empty(t, left)

	require.NoError(t, tg.saveSidecar(&sidecar{State: "incomplete", Size: 4096, BlockSize: 4096}))
	require.True(t, tg.marked)
	require.FileExists(t, filepath.Join(dir, "vm.img"+sidecarSuffix))
	require.Equal(t, 1, faults.Hits())
}
