package target

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRootEscapeIsTyped: a name that leaves Options.Root through a
// symlinked directory is refused with ErrOutsideRoot (matched by type, not
// by os.Root's text), in place and atomic, and nothing appears outside.
func TestRootEscapeIsTyped(t *testing.T) {
	root, dir, outside := jail(t)
	require.NoError(t, os.Symlink(filepath.Dir(outside), filepath.Join(dir, "up")))
	for _, atomic := range []bool{false, true} {
		_, err := Create("up/new", &Options{Root: root, Atomic: atomic})
		require.ErrorIs(t, err, ErrOutsideRoot, "atomic=%v", atomic)
		require.NoFileExists(t, filepath.Join(filepath.Dir(outside), "new"))
	}
	// A missing file inside the root is not an escape.
	_, err := OpenNoFollow(root, "nothing/here", os.O_RDONLY, 0)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NotErrorIs(t, err, ErrOutsideRoot)
}

// TestRootErr: only os.Root's escape is marked, its text is kept, and
// other errors pass unchanged.
func TestRootErr(t *testing.T) {
	root, _, _ := jail(t)
	_, err := root.Open("../x")
	require.Error(t, err)
	marked := RootErr(err)
	require.ErrorIs(t, marked, ErrOutsideRoot)
	require.Equal(t, err.Error(), marked.Error())
	require.ErrorIs(t, marked, err)
	require.NoError(t, RootErr(nil))
	other := errors.New("other")
	require.Equal(t, other, RootErr(other))
	require.NotErrorIs(t, RootErr(fs.ErrNotExist), ErrOutsideRoot)
}
