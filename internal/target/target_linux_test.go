package target

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAtomicCommitAndAbort(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "dst")
	require.NoError(t, os.WriteFile(dst, []byte("old"), 0o640))

	tf, err := Create(dst, &Options{Atomic: true, Mode: 0o604})
	require.NoError(t, err)
	require.NotEmpty(t, tf.TempName())
	_, err = tf.WriteAt([]byte("partial"), 0)
	require.NoError(t, err)
	require.NoError(t, tf.Abort())
	got, _ := os.ReadFile(dst)
	require.Equal(t, "old", string(got), "abort keeps the old destination")
	require.NoFileExists(t, tf.TempName())

	tf, err = Create(dst, &Options{Atomic: true, Mode: 0o604})
	require.NoError(t, err)
	require.NoError(t, tf.SetSize(1<<20))
	_, err = tf.WriteAt([]byte("new"), 0)
	require.NoError(t, err)
	punched, err := tf.Zero(0, 4096)
	require.NoError(t, err)
	require.True(t, punched)
	_, err = tf.WriteAt([]byte("new"), 8192)
	require.NoError(t, err)
	require.NoError(t, tf.Commit(true))
	require.ErrorIs(t, tf.Commit(true), ErrClosed)
	got, _ = os.ReadFile(dst)
	require.Len(t, got, 1<<20)
	require.Equal(t, "new", string(got[8192:8195]))
	require.True(t, bytes.Equal(make([]byte, 4096), got[:4096]))
	fi, err := os.Stat(dst)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o604), fi.Mode().Perm(), "mode set exactly, not masked")
	tmps, _ := filepath.Glob(filepath.Join(dir, ".*"))
	require.Empty(t, tmps)
}

func TestInPlaceCreatedIsRemovedOnAbort(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "new")
	tf, err := Create(dst, nil)
	require.NoError(t, err)
	require.True(t, tf.Created())
	require.NoError(t, tf.Abort())
	require.NoFileExists(t, dst)

	old := filepath.Join(dir, "old")
	require.NoError(t, os.WriteFile(old, []byte("keep"), 0o600))
	tf, err = Create(old, nil)
	require.NoError(t, err)
	require.False(t, tf.Created())
	require.NoError(t, tf.Abort())
	require.FileExists(t, old, "an existing destination is never removed")
}

func TestRefusesNonTargets(t *testing.T) {
	dir := t.TempDir()
	_, err := Create(dir, nil)
	require.ErrorIs(t, err, ErrNotTarget)
	_, err = Create("/dev/null", nil)
	require.ErrorIs(t, err, ErrNotTarget)
	_, err = Create(filepath.Join(dir, "missing", "x"), &Options{Atomic: true})
	require.ErrorIs(t, err, fs.ErrNotExist)

	// Open leaves the caller's file open when it refuses it.
	f, err := os.Open(dir)
	require.NoError(t, err)
	defer f.Close()
	_, err = Open(f)
	require.ErrorIs(t, err, ErrNotTarget)
	_, err = f.Stat()
	require.NoError(t, err, "Open closed the caller's file")
}

// TestAtomicErrorsNameTheDestination: a failure on the temporary file of an
// atomic Create (creating it, renaming it over the destination) names the
// destination the caller gave, never the random temporary name, and keeps
// the errno.
func TestAtomicErrorsNameTheDestination(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })
	check := func(err error, name string) {
		t.Helper()
		require.Error(t, err)
		require.Contains(t, err.Error(), name)
		require.NotContains(t, err.Error(), ".sparsesync-", "no temporary name: %v", err)
	}

	missing := filepath.Join(dir, "missing", "dst")
	_, err = Create(missing, &Options{Atomic: true})
	check(err, missing)
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = Create("missing/dst", &Options{Atomic: true, Root: root})
	check(err, "missing/dst")
	require.ErrorIs(t, err, fs.ErrNotExist)

	// The destination becomes a non-empty directory before the rename.
	for _, r := range []*os.Root{nil, root} {
		name := "dst"
		if r == nil {
			name = filepath.Join(dir, name)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "dst"), []byte("old"), 0o600))
		tf, err := Create(name, &Options{Atomic: true, Root: r})
		require.NoError(t, err)
		require.NoError(t, os.Remove(filepath.Join(dir, "dst")))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "dst", "sub"), 0o755))
		err = tf.Commit(false)
		check(err, name)
		require.NoError(t, tf.Abort())
		require.NoError(t, os.RemoveAll(filepath.Join(dir, "dst")))
	}
}
