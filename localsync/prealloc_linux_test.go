package localsync

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// TestPreallocateSmallExtentsOnExt4: a new copy on ext4 allocates each
// small source extent's destination blocks, exactly that extent, before it
// copies it, in file order; on XFS (delayed allocation does well there) it
// allocates nothing ahead; both copies are exact, holes included.
func TestPreallocateSmallExtentsOnExt4(t *testing.T) {
	const mib = 1 << 20
	l := layout.Layout{Name: "small-extents", Size: 128 * mib}
	for off := int64(0); off+4096 <= l.Size; off += 64 << 10 {
		l.Data = append(l.Data, layout.Range{Off: off, Len: 4096})
	}
	for _, kind := range []loopfs.Kind{loopfs.Ext4, loopfs.XFS} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			dir := loopfs.Mount(t, kind, 512*mib)
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			layout.Create(t, src, l) // 2,048 extents of 4 KiB

			// copy_file_range: on XFS the default clones the whole file,
			// and no copy job would run to allocate anything.
			st, f := copyCounting(t, src, dst, &Options{Method: MethodCopyRange})
			require.Equal(t, st.DataBytes, st.CopiedBytes, "every extent copied by a job: %+v", st)

			var got []layout.Range
			for _, r := range f.Ranges(target.OpAllocate) {
				got = append(got, layout.Range{Off: r.Off, Len: r.Len})
			}
			if kind == loopfs.Ext4 {
				require.Equal(t, l.Data, got, "each extent allocated ahead, exactly, in file order")
			} else {
				require.Empty(t, got, "nothing allocated ahead on %s", kind)
			}
			requireExact(t, src, dst, string(kind))
		})
	}
}
