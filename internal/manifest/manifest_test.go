package manifest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// recorded is a manifest of a 360 KiB file: block 0 whole, the 16 KiB of
// block 2 from 136 KiB (a data extent's start), block 5 short (the end of
// the file); recorded out of order and one range twice, as workers do.
func recorded(t *testing.T) (*Manifest, map[[2]int64][]byte) {
	t.Helper()
	r, err := NewRecorder(nil, MinBlockSize)
	require.NoError(t, err)
	d, err := r.Digester()
	require.NoError(t, err)
	const b2 = 2*MinBlockSize + 8<<10
	ranges := map[[2]int64][]byte{
		{0, MinBlockSize}: bytes.Repeat([]byte("a"), MinBlockSize),
		{b2, 16 << 10}:    bytes.Repeat([]byte("b"), 16<<10),
		{5 * MinBlockSize, 360<<10 - 5*MinBlockSize}: bytes.Repeat([]byte("c"), 360<<10-5*MinBlockSize),
	}
	e := func(off, n int64, b []byte) Entry { return Entry{off, n, d.Sum(off, b)} }
	r.Add([]Entry{e(5*MinBlockSize, 360<<10-5*MinBlockSize, ranges[[2]int64{5 * MinBlockSize, 360<<10 - 5*MinBlockSize}]),
		e(b2, 16<<10, bytes.Repeat([]byte("stale"), 16<<10/5+1)[:16<<10])})
	r.Add([]Entry{e(0, MinBlockSize, ranges[[2]int64{0, MinBlockSize}]), e(b2, 16<<10, ranges[[2]int64{b2, 16 << 10}])})
	m, ok := r.Manifest(360 << 10)
	require.True(t, ok)
	return m, ranges
}

// TestSaveLoad: a saved manifest loads back with every digest, and a
// digester under its key (the next sync's) recomputes them; a range not
// recorded, or recorded with another length, has none.
func TestSaveLoad(t *testing.T) {
	m, ranges := recorded(t)
	dst := filepath.Join(t.TempDir(), "disk.img")
	require.NoError(t, Save(dst, m))
	fi, err := os.Stat(Path(dst))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	got, err := Load(dst, m.ID, MinBlockSize, 360<<10)
	require.NoError(t, err)
	require.Equal(t, 3, got.Len())
	next, err := NewRecorder(got, 0)
	require.NoError(t, err)
	d, err := next.Digester()
	require.NoError(t, err)
	for r, b := range ranges {
		tag, ok := got.Lookup(r[0], r[1])
		require.True(t, ok, "range %v", r)
		require.Equal(t, d.Sum(r[0], b), tag, "range %v: the later record wins, under the saved key", r)
	}
	for _, r := range [][2]int64{{MinBlockSize, MinBlockSize}, {2 * MinBlockSize, MinBlockSize}, {2*MinBlockSize + 8<<10, 8 << 10}, {0, 4096}} {
		_, ok := got.Lookup(r[0], r[1])
		require.False(t, ok, "range %v was not recorded", r)
	}
	require.True(t, got.Covers(MinBlockSize, 3*MinBlockSize))
	require.False(t, got.Covers(3*MinBlockSize, 5*MinBlockSize))
}

// TestTagsAreKeyedAndPlaced: one range's digest differs under another key,
// at another offset and at another length, so neither a sidecar of another
// file nor bytes moved within the file can vouch for it.
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
	require.Equal(t, d1.Sum(3*MinBlockSize, b), d1.Sum(3*MinBlockSize, b))
	require.NotEqual(t, d1.Sum(3*MinBlockSize, b), d2.Sum(3*MinBlockSize, b), "another key")
	require.NotEqual(t, d1.Sum(3*MinBlockSize, b), d1.Sum(4*MinBlockSize, b), "another offset")
	require.NotEqual(t, d1.Sum(3*MinBlockSize, b), d1.Sum(3*MinBlockSize, b[:len(b)-1]), "a shorter range")
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

	_, err := Load(filepath.Join(dir, "none"), m.ID, MinBlockSize, 360<<10)
	require.ErrorIs(t, err, os.ErrNotExist)
	for name, args := range map[string]struct {
		id       string
		bs, size int64
	}{
		"another id":         {"00000000000000000000000000000000", MinBlockSize, 360 << 10},
		"another block size": {m.ID, 2 * MinBlockSize, 360 << 10},
		"another size":       {m.ID, MinBlockSize, 361 << 10},
	} {
		_, err := Load(dst, args.id, args.bs, args.size)
		require.ErrorIs(t, err, ErrInvalid, name)
	}
	for _, at := range []int{0, 9, headerLen - 1, headerLen + 3, len(good) - 1} {
		b := bytes.Clone(good)
		b[at] ^= 1
		require.NoError(t, os.WriteFile(Path(dst), b, 0o600))
		_, err := Load(dst, m.ID, MinBlockSize, 360<<10)
		require.ErrorIs(t, err, ErrInvalid, "a bit flipped at %d", at)
	}
	require.NoError(t, os.WriteFile(Path(dst), good[:len(good)-7], 0o600))
	_, err = Load(dst, m.ID, MinBlockSize, 360<<10)
	require.ErrorIs(t, err, ErrInvalid, "torn")

	// Intact (a good checksum) but describing ranges no sync records.
	for name, es := range map[string][]Entry{
		"crossing a block edge": {{MinBlockSize - 4096, 8192, Tag{}}},
		"overlapping":           {{0, 8192, Tag{}}, {4096, 4096, Tag{}}},
		"past the end":          {{5 * MinBlockSize, MinBlockSize, Tag{}}},
		"empty":                 {{0, 0, Tag{}}},
	} {
		bad := *m
		bad.entries = es
		require.NoError(t, Save(dst, &bad))
		_, err := Load(dst, m.ID, MinBlockSize, 360<<10)
		require.ErrorIs(t, err, ErrInvalid, name)
	}

	save()
	require.NoError(t, os.Chmod(Path(dst), 0o640))
	_, err = Load(dst, m.ID, MinBlockSize, 360<<10)
	require.ErrorIs(t, err, ErrInvalid, "readable by its group")

	save()
	require.NoError(t, os.Rename(Path(dst), dst+".real"))
	require.NoError(t, os.Symlink(dst+".real", Path(dst)))
	_, err = Load(dst, m.ID, MinBlockSize, 360<<10)
	require.ErrorIs(t, err, ErrInvalid, "a symbolic link")
	save() // replaces the link, never writes through it
	fi, err := os.Lstat(Path(dst))
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular())

	if os.Geteuid() == 0 {
		require.NoError(t, os.Chown(Path(dst), 65534, 65534))
		_, err = Load(dst, m.ID, MinBlockSize, 360<<10)
		require.ErrorIs(t, err, ErrInvalid, "owned by another user")
	}
	save()
	_, err = Load(dst, m.ID, MinBlockSize, 360<<10)
	require.NoError(t, err)
	require.NoError(t, Remove(dst))
	require.NoError(t, Remove(dst), "already gone")
}
