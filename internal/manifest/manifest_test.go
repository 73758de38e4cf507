package manifest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// recorded is a manifest of blocks 0, 2 and 5 of a 400 KiB file (the last
// block short), recorded out of order and block 2 twice, as workers do.
func recorded(t *testing.T) (*Manifest, map[int64][]byte) {
	t.Helper()
	r, err := NewRecorder(nil, MinBlockSize)
	require.NoError(t, err)
	d, err := r.Digester()
	require.NoError(t, err)
	blocks := map[int64][]byte{
		0: bytes.Repeat([]byte("a"), MinBlockSize),
		2: bytes.Repeat([]byte("b"), MinBlockSize),
		5: bytes.Repeat([]byte("c"), 400<<10-5*MinBlockSize),
	}
	r.Add([]Entry{{5, d.Sum(5, blocks[5])}, {2, d.Sum(2, []byte("stale"))}})
	r.Add([]Entry{{0, d.Sum(0, blocks[0])}, {2, d.Sum(2, blocks[2])}})
	m, ok := r.Manifest(400 << 10)
	require.True(t, ok)
	return m, blocks
}

// TestSaveLoad: a saved manifest loads back with every digest, and a
// digester under its key (the next sync's) recomputes them; a block not
// recorded has none.
func TestSaveLoad(t *testing.T) {
	m, blocks := recorded(t)
	dst := filepath.Join(t.TempDir(), "disk.img")
	require.NoError(t, Save(dst, m))
	fi, err := os.Stat(Path(dst))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	got, err := Load(dst, m.ID, MinBlockSize, 400<<10)
	require.NoError(t, err)
	require.Equal(t, 3, got.Len())
	next, err := NewRecorder(got, 0)
	require.NoError(t, err)
	d, err := next.Digester()
	require.NoError(t, err)
	for i, b := range blocks {
		tag, ok := got.Lookup(i)
		require.True(t, ok, "block %d", i)
		require.Equal(t, d.Sum(i, b), tag, "block %d: the later record wins, under the saved key", i)
	}
	for _, i := range []int64{1, 3, 4, 6} {
		_, ok := got.Lookup(i)
		require.False(t, ok, "block %d was not recorded", i)
	}
}

// TestTagsAreKeyedAndPlaced: one block's digest differs under another key
// and at another index, so neither a sidecar of another file nor a block
// moved within the file can vouch for it.
func TestTagsAreKeyedAndPlaced(t *testing.T) {
	b := bytes.Repeat([]byte{7}, MinBlockSize)
	r1, err := NewRecorder(nil, MinBlockSize)
	require.NoError(t, err)
	r2, err := NewRecorder(nil, MinBlockSize)
	require.NoError(t, err)
	d1, err := r1.Digester()
	require.NoError(t, err)
	d2, err := r2.Digester()
	require.NoError(t, err)
	require.Equal(t, d1.Sum(3, b), d1.Sum(3, b))
	require.NotEqual(t, d1.Sum(3, b), d2.Sum(3, b), "another key")
	require.NotEqual(t, d1.Sum(3, b), d1.Sum(4, b), "another index")
	require.NotEqual(t, d1.Sum(3, b), d1.Sum(3, b[:len(b)-1]), "a shorter block")
}

// TestLoadRefuses: a sidecar is used only when it is the manifest the mark
// names, intact, and private to this user.
func TestLoadRefuses(t *testing.T) {
	m, _ := recorded(t)
	dir := t.TempDir()
	dst := filepath.Join(dir, "disk.img")
	save := func() []byte {
		t.Helper()
		require.NoError(t, Save(dst, m))
		b, err := os.ReadFile(Path(dst))
		require.NoError(t, err)
		return b
	}
	good := save()

	_, err := Load(filepath.Join(dir, "none"), m.ID, MinBlockSize, 400<<10)
	require.ErrorIs(t, err, os.ErrNotExist)
	for name, args := range map[string]struct {
		id       string
		bs, size int64
	}{
		"another id":         {"00000000000000000000000000000000", MinBlockSize, 400 << 10},
		"another block size": {m.ID, 2 * MinBlockSize, 400 << 10},
		"another size":       {m.ID, MinBlockSize, 401 << 10},
	} {
		_, err := Load(dst, args.id, args.bs, args.size)
		require.ErrorIs(t, err, ErrInvalid, name)
	}
	for _, at := range []int{0, 9, headerLen - 1, headerLen + 3, len(good) - 1} {
		b := bytes.Clone(good)
		b[at] ^= 1
		require.NoError(t, os.WriteFile(Path(dst), b, 0o600))
		_, err := Load(dst, m.ID, MinBlockSize, 400<<10)
		require.ErrorIs(t, err, ErrInvalid, "a bit flipped at %d", at)
	}
	require.NoError(t, os.WriteFile(Path(dst), good[:len(good)-7], 0o600))
	_, err = Load(dst, m.ID, MinBlockSize, 400<<10)
	require.ErrorIs(t, err, ErrInvalid, "torn")

	save()
	require.NoError(t, os.Chmod(Path(dst), 0o640))
	_, err = Load(dst, m.ID, MinBlockSize, 400<<10)
	require.ErrorIs(t, err, ErrInvalid, "readable by its group")

	save()
	require.NoError(t, os.Rename(Path(dst), dst+".real"))
	require.NoError(t, os.Symlink(dst+".real", Path(dst)))
	_, err = Load(dst, m.ID, MinBlockSize, 400<<10)
	require.ErrorIs(t, err, ErrInvalid, "a symbolic link")
	save() // replaces the link, never writes through it
	fi, err := os.Lstat(Path(dst))
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular())

	if os.Geteuid() == 0 {
		require.NoError(t, os.Chown(Path(dst), 65534, 65534))
		_, err = Load(dst, m.ID, MinBlockSize, 400<<10)
		require.ErrorIs(t, err, ErrInvalid, "owned by another user")
	}
	save()
	_, err = Load(dst, m.ID, MinBlockSize, 400<<10)
	require.NoError(t, err)
	require.NoError(t, Remove(dst))
	require.NoError(t, Remove(dst), "already gone")
}
