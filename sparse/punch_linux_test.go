package sparse

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// TestPunchHole punches a range in the middle of a data file on every
// filesystem: it reads back as zeros, the size stays, and the walker sees the
// hole.
func TestPunchHole(t *testing.T) {
	loopfs.Run(t, 1<<30, func(t *testing.T, kind loopfs.Kind, dir string) {
		path := filepath.Join(dir, "f")
		layout.Create(t, path, layout.Layout{Size: 1 << 20, Data: layout.Ranges(0, 1<<20)})
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		defer f.Close()
		punched, err := PunchHole(f, 64<<10, 128<<10)
		require.NoError(t, err)
		require.True(t, punched)
		got := make([]byte, 1<<20)
		_, err = f.ReadAt(got, 0)
		require.NoError(t, err)
		want := make([]byte, 1<<20)
		layout.Pattern(want, 0)
		clear(want[64<<10 : 192<<10])
		require.Equal(t, want, got)
		w, err := NewWalker(f)
		require.NoError(t, err)
		m, err := w.Map(t.Context())
		require.NoError(t, err)
		require.Equal(t, []Extent{{0, 64 << 10}, {192 << 10, 832 << 10}}, m.Extents())
	})
}

func TestWriteZeros(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	layout.Create(t, path, layout.Layout{Size: 200 << 10, Data: layout.Ranges(0, 200<<10)})
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, WriteZeros(f, 1, 150<<10))
	got := make([]byte, 200<<10)
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	want := make([]byte, 200<<10)
	layout.Pattern(want, 0)
	clear(want[1 : 1+150<<10])
	require.Equal(t, want, got)
}
