package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestLoopFSCloseAfterUnmount: Close of a filesystem already unmounted
// (by hand, or a second Close) removes its directory and reports nothing;
// the not-mounted case is told by its errno, not by umount's text.
func TestLoopFSCloseAfterUnmount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a loop filesystem")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("needs mkfs.ext4")
	}
	l, err := MountLoop(t.Context(), "ext4", 64<<20, t.TempDir())
	require.NoError(t, err)
	require.NoError(t, unix.Unmount(l.Dir, 0))
	require.NoError(t, l.Close())
	require.NoDirExists(t, filepath.Dir(l.Dir))
	require.NoError(t, l.Close(), "a second Close")

	// Busy: a file held open is detached lazily, and Close still succeeds.
	l, err = MountLoop(t.Context(), "ext4", 64<<20, t.TempDir())
	require.NoError(t, err)
	f, err := os.Create(filepath.Join(l.Dir, "held"))
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, l.Close())
	require.NoDirExists(t, filepath.Dir(l.Dir))
}
