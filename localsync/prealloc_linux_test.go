package localsync

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// TestPreallocateSmallExtentsOnExt4: a new copy on ext4 allocates each
// small source extent's destination blocks, exactly that extent, before it
// copies it; on XFS (delayed allocation does well there) it allocates
// nothing ahead; both copies are exact, holes included. Not parallel: it
// swaps the hook.
func TestPreallocateSmallExtentsOnExt4(t *testing.T) {
	const mib = 1 << 20
	l := layout.Layout{Name: "small-extents", Size: 128 * mib}
	for off := int64(0); off+4096 <= l.Size; off += 64 << 10 {
		l.Data = append(l.Data, layout.Range{Off: off, Len: 4096})
	}
	for _, kind := range []loopfs.Kind{loopfs.Ext4, loopfs.XFS} {
		t.Run(string(kind), func(t *testing.T) {
			dir := loopfs.Mount(t, kind, 512*mib)
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			layout.Create(t, src, l) // 2,048 extents of 4 KiB

			var mu sync.Mutex
			var got []layout.Range
			orig := preallocate
			t.Cleanup(func() { preallocate = orig })
			preallocate = func(f *os.File, off, n int64) {
				mu.Lock()
				got = append(got, layout.Range{Off: off, Len: n})
				mu.Unlock()
				orig(f, off, n)
			}
			_, err := Copy(context.Background(), src, dst, &Options{})
			require.NoError(t, err)

			slices.SortFunc(got, func(a, b layout.Range) int { return int(a.Off - b.Off) })
			if kind == loopfs.Ext4 {
				require.Equal(t, l.Data, got, "each extent allocated ahead, exactly")
			} else {
				require.Empty(t, got, "nothing allocated ahead on %s", kind)
			}
			requireExact(t, src, dst, string(kind))
		})
	}
}
