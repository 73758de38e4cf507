package target

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/sparse"
)

// TestAllocateAhead asks the kernel what AllocateAhead left: on ext4 a
// small extent's piece becomes exactly that range of unwritten blocks
// (FIEMAP), the size unchanged; a piece of a large extent, and anything on
// XFS or tmpfs, allocates nothing; a fault rule skips the call, which is
// still recorded, and nothing is reported.
func TestAllocateAhead(t *testing.T) {
	const (
		kib  = 1 << 10
		mib  = 1 << 20
		size = 64 * mib
	)
	for _, kind := range []loopfs.Kind{loopfs.Ext4, loopfs.XFS, loopfs.Tmpfs} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			dir := loopfs.Mount(t, kind, 512*mib)
			faults := NewFaults(Fault{Op: OpAllocate, N: 3, Err: errors.New("planted")})
			tf, err := Create(filepath.Join(dir, "f"), &Options{Faults: faults})
			require.NoError(t, err)
			t.Cleanup(func() { tf.Close() })
			require.NoError(t, tf.SetSize(size))

			tf.AllocateAhead(mib, 64*kib, 64*kib)                                        // a small extent, whole
			tf.AllocateAhead(4*mib, 8*kib, 12*kib)                                       // the first piece of a small one
			tf.AllocateAhead(8*mib, 64*kib, mib)                                         // a piece of a 1 MiB extent: not small
			tf.AllocateAhead(16*mib, 4*kib, 4*kib)                                       // the fault: skipped
			tf.AllocateAhead(32*mib, 0, 4*kib)                                           // nothing to allocate
			tf.AllocateAhead(40*mib, AllocateAheadBelow-4*kib, AllocateAheadBelow-4*kib) // the largest small one

			var unwritten []sparse.Extent
			require.NoError(t, fiemap(kind, tf, size, func(x sparse.FiemapExtent) error {
				require.NotZero(t, x.Flags&sparse.FiemapUnwritten, "only unwritten blocks: %+v", x)
				unwritten = append(unwritten, x.Extent())
				return nil
			}))
			info, err := sparse.Stat(tf.OS())
			require.NoError(t, err)
			require.Equal(t, int64(size), info.Size, "the size is left alone")

			if kind != loopfs.Ext4 {
				require.Zero(t, info.Allocated, "nothing allocated ahead on %s", kind)
				require.Empty(t, faults.Ranges(OpAllocate), "no call on %s", kind)
				return
			}
			want := []sparse.Extent{{Off: mib, Len: 64 * kib}, {Off: 4 * mib, Len: 8 * kib}, {Off: 40 * mib, Len: AllocateAheadBelow - 4*kib}}
			require.Equal(t, want, unwritten, "exactly the small pieces, as unwritten blocks")
			require.Equal(t, int64(64*kib+8*kib+AllocateAheadBelow-4*kib), info.Allocated)
			require.Equal(t, []Range{{mib, 64 * kib}, {4 * mib, 8 * kib}, {16 * mib, 4 * kib}, {40 * mib, AllocateAheadBelow - 4*kib}},
				faults.Ranges(OpAllocate), "every call recorded in order, the skipped one too")
			require.Equal(t, 1, faults.Hits())
		})
	}
}

// fiemap is sparse.Fiemap over [0, size), nothing on tmpfs (which has no
// FIEMAP; st_blocks tells there).
func fiemap(kind loopfs.Kind, tf *File, size int64, fn func(sparse.FiemapExtent) error) error {
	if kind == loopfs.Tmpfs {
		return nil
	}
	return sparse.Fiemap(context.Background(), tf.OS(), 0, size, fn)
}
