package tcpsync

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestList: a listing names the regular, single-linked files of a directory
// beneath the root, sorted, and nothing else; the directory is resolved
// with the jail's rules.
func TestList(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "vol")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	for _, n := range []string{"volume.meta", "volume-snap-b.img", "volume-snap-b.img.meta", "volume-head-001.img"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644))
	}
	outside := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(outside, []byte("x"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link.img")))
	require.NoError(t, os.Link(filepath.Join(dir, "volume.meta"), filepath.Join(dir, "hard.img")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	require.NoError(t, os.Symlink("vol", filepath.Join(root, "alias")))
	addr, _ := startServer(t, root, nil)

	names, err := List(t.Context(), addr, "vol", clientOpts())
	require.NoError(t, err)
	// volume.meta has two links now (hard.img): both are left out.
	require.Equal(t, []string{"volume-head-001.img", "volume-snap-b.img", "volume-snap-b.img.meta"}, names)

	_, err = List(t.Context(), addr, "alias", clientOpts())
	require.ErrorIs(t, err, ErrPathOutsideRoot)
	_, err = List(t.Context(), addr, "missing", clientOpts())
	require.ErrorIs(t, err, ErrNotFound)
	_, err = List(t.Context(), addr, "../x", clientOpts())
	require.ErrorIs(t, err, ErrBadPath)
}
