package target

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/sparse"
)

// jail is a directory opened as an os.Root, with a file outside it that
// no Create inside the root may touch.
func jail(t *testing.T) (root *os.Root, dir, outside string) {
	base := t.TempDir()
	dir = filepath.Join(base, "root")
	require.NoError(t, os.Mkdir(dir, 0o755))
	outside = filepath.Join(base, "outside")
	require.NoError(t, os.WriteFile(outside, []byte("secret"), 0o600))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })
	return root, dir, outside
}

func TestRootInPlace(t *testing.T) {
	root, dir, _ := jail(t)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	tf, err := Create("sub/new", &Options{Root: root, Mode: 0o604})
	require.NoError(t, err)
	require.True(t, tf.Created())
	require.NoError(t, tf.SetSize(10_000))
	_, err = tf.WriteAt([]byte("abc"), 9997)
	require.NoError(t, err)
	require.NoError(t, tf.Commit(true))
	got, err := os.ReadFile(filepath.Join(dir, "sub", "new"))
	require.NoError(t, err)
	require.Len(t, got, 10_000)
	require.Equal(t, "abc", string(got[9997:]))
	fi, err := os.Stat(filepath.Join(dir, "sub", "new"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o604), fi.Mode().Perm())

	// An existing file is opened in place, not created: Abort keeps it.
	tf, err = Create("sub/new", &Options{Root: root})
	require.NoError(t, err)
	require.False(t, tf.Created())
	require.NoError(t, tf.Abort())
	require.FileExists(t, filepath.Join(dir, "sub", "new"))

	// A file Create made is removed by Abort, inside the root.
	tf, err = Create("made", &Options{Root: root})
	require.NoError(t, err)
	require.NoError(t, tf.Abort())
	require.NoFileExists(t, filepath.Join(dir, "made"))
}

func TestRootRefusesEscapesAndNonFiles(t *testing.T) {
	root, dir, outside := jail(t)
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "out")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in"), []byte("inside"), 0o600))
	require.NoError(t, os.Symlink("in", filepath.Join(dir, "link")))
	require.NoError(t, os.Symlink(filepath.Dir(outside), filepath.Join(dir, "updir")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	require.NoError(t, unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600))

	for _, atomic := range []bool{false, true} {
		for _, name := range []string{"out", "link", "../outside", "updir/outside", "updir/new"} {
			tf, err := Create(name, &Options{Root: root, Atomic: atomic, Truncate: true})
			require.Error(t, err, "%s atomic=%v", name, atomic)
			require.Nil(t, tf)
		}
		for _, name := range []string{"d", "fifo"} {
			_, err := Create(name, &Options{Root: root, Atomic: atomic})
			require.ErrorIs(t, err, ErrNotTarget, "%s atomic=%v", name, atomic)
		}
		// A leftover temporary name that is a symlink is not followed.
		_, err := Create("in", &Options{Root: root, Atomic: atomic, TempName: "out"})
		if atomic {
			require.ErrorIs(t, err, syscall.ELOOP)
		} else {
			require.NoError(t, err)
		}
	}
	got, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Equal(t, "secret", string(got), "the file outside the root is untouched")
	got, err = os.ReadFile(filepath.Join(dir, "in"))
	require.NoError(t, err)
	require.Equal(t, "inside", string(got), "a symlink's target inside the root is untouched")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 6, "no temporary file left behind")
}

func TestRootAtomicPublish(t *testing.T) {
	root, dir, _ := jail(t)
	dst := filepath.Join(dir, "img")
	require.NoError(t, os.WriteFile(dst, []byte("old contents"), 0o600))
	// A leftover temporary file of a fixed name is reused, not emptied:
	// the caller empties it once it holds it.
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".img.tmp"), []byte("stale"), 0o600))

	tf, err := Create("img", &Options{Root: root, Atomic: true, TempName: ".img.tmp", Mode: 0o644})
	require.NoError(t, err)
	require.Equal(t, ".img.tmp", tf.TempName())
	b := make([]byte, 5)
	_, err = tf.OS().ReadAt(b, 0)
	require.NoError(t, err)
	require.Equal(t, "stale", string(b))
	require.NoError(t, tf.SetSize(0))
	require.NoError(t, tf.SetSize(8192))
	_, err = tf.WriteAt([]byte("new"), 4096)
	require.NoError(t, err)
	got, _ := os.ReadFile(dst)
	require.Equal(t, "old contents", string(got), "the destination is untouched before Publish")

	require.NoError(t, tf.Publish(true))
	require.Empty(t, tf.TempName())
	require.NoFileExists(t, filepath.Join(dir, ".img.tmp"))
	got, _ = os.ReadFile(dst)
	require.Len(t, got, 8192)
	require.Equal(t, "new", string(got[4096:4099]))
	// The file stays open after Publish: it is the published inode.
	info, err := sparse.Stat(tf.OS())
	require.NoError(t, err)
	fi, err := os.Stat(dst)
	require.NoError(t, err)
	require.Equal(t, fi.Sys().(*syscall.Stat_t).Ino, info.Ino)
	require.Equal(t, fs.FileMode(0o644), fi.Mode().Perm())
	require.NoError(t, tf.Abort(), "Abort after Publish only closes")
	require.FileExists(t, dst)
	require.ErrorIs(t, tf.Publish(true), ErrClosed)

	// Without TempName a unique temporary name is made inside the root,
	// and Abort removes it.
	tf, err = Create("img", &Options{Root: root, Atomic: true})
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(dir, tf.TempName()))
	require.NoError(t, tf.Abort())
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1)
}

func TestOpenNoFollow(t *testing.T) {
	root, dir, outside := jail(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in"), []byte("inside"), 0o600))
	require.NoError(t, os.Symlink("in", filepath.Join(dir, "link")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "d", "out")))

	f, err := OpenNoFollow(root, "in", os.O_RDONLY, 0)
	require.NoError(t, err)
	b := make([]byte, 6)
	_, err = f.ReadAt(b, 0)
	require.NoError(t, err)
	require.Equal(t, "inside", string(b))
	require.NoError(t, f.Close())

	_, err = OpenNoFollow(root, "link", os.O_RDONLY, 0)
	require.ErrorIs(t, err, syscall.ELOOP, "a symlink inside the root is not followed either")
	_, err = OpenNoFollow(root, "d/out", os.O_WRONLY|os.O_TRUNC, 0)
	require.ErrorIs(t, err, syscall.ELOOP)
	_, err = OpenNoFollow(root, "d/..", os.O_RDONLY, 0)
	require.ErrorIs(t, err, syscall.EISDIR)
	_, err = OpenNoFollow(root, "../outside", os.O_RDONLY, 0)
	require.Error(t, err)
	_, err = OpenNoFollow(nil, filepath.Join(dir, "link"), os.O_RDONLY, 0)
	require.ErrorIs(t, err, syscall.ELOOP)
	got, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Equal(t, "secret", string(got))
}
