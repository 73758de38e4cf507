package sparse

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// TestHiddenAllocation: on every filesystem, a file with data and an
// unwritten preallocation (fallocate) in what the walk calls a hole. The
// kernel's own accounting is the oracle: the walk's data is short of
// st_blocks by the preallocation. HiddenAllocation finds it exactly (by
// FIEMAP, on tmpfs by cachestat), never any of the data; and a file
// without preallocation has nothing hidden.
func TestHiddenAllocation(t *testing.T) {
	loopfs.Run(t, 1<<30, func(t *testing.T, kind loopfs.Kind, dir string) {
		path := filepath.Join(dir, "f")
		layout.Create(t, path, layout.Layout{Size: 4 << 20, Data: layout.Ranges(0, 64<<10, 3<<20, 64<<10)})
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		defer f.Close()
		require.NoError(t, f.Sync())
		walk := func() (Map, int64) {
			t.Helper()
			w, err := NewWalker(f)
			require.NoError(t, err)
			m, err := w.Map(t.Context())
			require.NoError(t, err)
			return m, w.Info().Allocated
		}

		data, alloc := walk()
		hidden, err := HiddenAllocation(t.Context(), f, data, alloc)
		require.NoError(t, err)
		require.Zero(t, hidden.Len(), "nothing preallocated: nothing hidden (allocated %d, data %d)", alloc, data.Bytes())

		prealloc := Extent{Off: 1 << 20, Len: 512 << 10}
		layout.Preallocate(t, path, prealloc.Off, prealloc.Len)
		data, alloc = walk()
		require.Equal(t, int64(128<<10), data.Bytes(), "the walk does not see the preallocation")
		require.GreaterOrEqual(t, alloc, data.Bytes()+prealloc.Len, "but it is allocated")
		hidden, err = HiddenAllocation(t.Context(), f, data, alloc)
		require.NoError(t, err)
		require.Zero(t, hidden.Intersect(data).Len(), "data is never hidden")
		want, err := NewMap(4<<20, prealloc)
		require.NoError(t, err)
		require.Equal(t, want, hidden, "located exactly (FIEMAP; on tmpfs cachestat)")

		// A hole that is only read is not allocated: on tmpfs reading
		// caches nothing there, elsewhere FIEMAP is not fooled.
		buf := make([]byte, 256<<10)
		_, err = f.ReadAt(buf, 2<<20)
		require.NoError(t, err)
		again, err := HiddenAllocation(t.Context(), f, data, alloc)
		require.NoError(t, err)
		require.Equal(t, want, again, "a read hole is not hidden allocation")

		// Data ending in a partial last page takes the whole page: not
		// hidden allocation (on tmpfs that would punch every hole and move
		// the mtime of an unchanged re-sync).
		tail := filepath.Join(dir, "tail")
		layout.Create(t, tail, layout.Layout{Size: 1<<20 + 1, Data: layout.Ranges(1<<20, 1)})
		tf, err := os.Open(tail)
		require.NoError(t, err)
		defer tf.Close()
		tw, err := NewWalker(tf)
		require.NoError(t, err)
		tm, err := tw.Map(t.Context())
		require.NoError(t, err)
		th, err := HiddenAllocation(t.Context(), tf, tm, tw.Info().Allocated)
		require.NoError(t, err)
		require.Zero(t, th.Len(), "a partial last page is not hidden (allocated %d)", tw.Info().Allocated)

		// Punched, it is gone for the kernel too.
		for _, x := range hidden.Extents() {
			_, err := PunchHole(f, x.Off, x.Len)
			require.NoError(t, err)
		}
		data, alloc = walk()
		hidden, err = HiddenAllocation(t.Context(), f, data, alloc)
		require.NoError(t, err)
		require.Zero(t, hidden.Len())
		require.LessOrEqual(t, alloc, data.RoundOut(64<<10).Bytes())
	})
}
