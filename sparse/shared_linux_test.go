package sparse

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// writeFile writes n bytes of pattern p at off of a new file.
func writeFile(t *testing.T, path string, n int, p byte) {
	t.Helper()
	b := bytes.Repeat([]byte{p, p + 1, p + 2, p + 3, 0xa5}, n/5+1)[:n]
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

// reflink makes to a clone of from (FICLONE).
func reflink(t *testing.T, from, to string) {
	t.Helper()
	s, err := os.Open(from)
	require.NoError(t, err)
	defer s.Close()
	d, err := os.Create(to)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, unix.IoctlFileClone(int(d.Fd()), int(s.Fd())))
	require.NoError(t, d.Sync())
}

func openSynced(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	require.NoError(t, f.Sync())
	return f
}

// TestSharedRanges checks, on the filesystems that share blocks, that two
// clones of one file are found the same everywhere but where one was
// rewritten, and that a source and a destination each cloned from *other*
// files (equal bytes or not) share nothing with each other.
func TestSharedRanges(t *testing.T) {
	for _, kind := range []loopfs.Kind{loopfs.XFS, loopfs.Btrfs} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			dir := loopfs.Mount(t, kind, 1<<30)
			const size = 4 << 20
			p := func(s string) string { return filepath.Join(dir, s) }
			writeFile(t, p("base"), size, 1)
			writeFile(t, p("other-same"), size, 1) // the same bytes, other blocks
			writeFile(t, p("other-diff"), size, 9)

			// Clones of one file: the same blocks, all of it.
			reflink(t, p("base"), p("a"))
			reflink(t, p("base"), p("b"))
			a, b := openSynced(t, p("a")), openSynced(t, p("b"))
			m, err := SharedRanges(t.Context(), a, b, size)
			require.NoError(t, err)
			require.Equal(t, []Extent{{0, size}}, m.Extents())

			// b rewrites one block: it is no longer the same.
			_, err = b.WriteAt(bytes.Repeat([]byte{0xee}, 4096), 1<<20)
			require.NoError(t, err)
			require.NoError(t, b.Sync())
			m, err = SharedRanges(t.Context(), a, b, size)
			require.NoError(t, err)
			require.Equal(t, []Extent{{0, 1 << 20}, {1<<20 + 4096, size - 1<<20 - 4096}}, m.Extents())

			// Each side cloned from a third file: both report shared
			// extents at the same offsets, but never the same blocks.
			for _, other := range []string{"other-same", "other-diff"} {
				reflink(t, p(other), p("c-"+other))
				c := openSynced(t, p("c-"+other))
				sa, err := SharedExtents(t.Context(), a, size)
				require.NoError(t, err)
				sc, err := SharedExtents(t.Context(), c, size)
				require.NoError(t, err)
				require.NotEmpty(t, sa)
				require.NotEmpty(t, sc)
				m, err = SharedRanges(t.Context(), a, c, size)
				require.NoError(t, err)
				require.Zero(t, m.Bytes(), "%s: files sharing with third files reported the same: %v", other, m.Extents())
			}

			// An unshared file shares nothing.
			writeFile(t, p("plain"), size, 3)
			pl := openSynced(t, p("plain"))
			m, err = SharedRanges(t.Context(), a, pl, size)
			require.NoError(t, err)
			require.Zero(t, m.Bytes())
		})
	}
	t.Run("tmpfs", func(t *testing.T) {
		dir := loopfs.Mount(t, loopfs.Tmpfs, 64<<20)
		writeFile(t, filepath.Join(dir, "x"), 8192, 1)
		f := openSynced(t, filepath.Join(dir, "x"))
		_, err := SharedRanges(t.Context(), f, f, 8192)
		require.True(t, errors.Is(err, errors.ErrUnsupported), "tmpfs has no FIEMAP: %v", err)
	})
}
