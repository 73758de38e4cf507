package localsync

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// TestSmallExtentsCopiedASpanAtATime: where the filesystem cannot clone, a
// new copy of close small extents writes each extent once from a span read
// in one go (no copy_file_range for them, the holes between them never
// written), isolated small extents and large ones keep copy_file_range,
// and the copy is exact to the byte and the hole.
func TestSmallExtentsCopiedASpanAtATime(t *testing.T) {
	const (
		kib    = 1 << 10
		nClose = 4000 // 4 KiB extents every 8 KiB
		nFar   = 300  // 4 KiB extents every 128 KiB
	)
	l := layout.Layout{Name: "spans", Size: 128 << 20}
	off := int64(0)
	for range nClose {
		l.Data = append(l.Data, layout.Range{Off: off, Len: 4 * kib})
		off += 8 * kib
	}
	for range nFar {
		off += 124 * kib
		l.Data = append(l.Data, layout.Range{Off: off, Len: 4 * kib})
		off += 4 * kib
	}
	l.Data = append(l.Data, layout.Range{Off: off + kib*kib, Len: 3 * kib * kib})
	for _, kind := range []loopfs.Kind{loopfs.Ext4, loopfs.Tmpfs} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			dir := loopfs.Mount(t, kind, 512<<20)
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			layout.Create(t, src, l)

			st, f := copyCounting(t, src, dst, &Options{})
			requireExact(t, src, dst, string(kind))
			require.Equal(t, st.DataBytes, st.CopiedBytes, "%+v", st)
			require.Equal(t, MethodMixed, st.Method, "%+v", st)
			require.Equal(t, nClose, f.Calls(target.OpWrite), "one write per close extent, none for a hole")
			require.GreaterOrEqual(t, f.Calls(target.OpCopyRange), nFar+1, "far extents and the large one by copy_file_range")
			require.Less(t, f.Calls(target.OpCopyRange), nFar+nClose/2, "close extents not by copy_file_range")
		})
	}
}
