package replica

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/sparse"
)

// TestExportAllocatesSmallExtentsAhead: exporting a chain onto ext4
// allocates each small range the chain resolves, exactly, in file order,
// before writing it (target.File.AllocateAhead), and leaves a large one to
// the filesystem; on XFS it allocates nothing ahead. The image holds the
// chain's bytes, its holes are holes, and no block is left unwritten.
func TestExportAllocatesSmallExtentsAhead(t *testing.T) {
	const (
		kib   = 1 << 10
		mib   = 1 << 20
		small = 600 // 8 KiB every 32 KiB: the first half in the head, the rest in the snapshot
	)
	size := int64(small*32*kib + 8*mib)
	big := sparse.Extent{Off: small*32*kib + 2*mib, Len: 4*mib + 512*kib} // cut into 1 MiB reads
	head := layerSpec{"volume-head-001.img", map[int64][]byte{}}
	snap := layerSpec{"volume-snap-a.img", map[int64][]byte{big.Off: fill('B', int(big.Len))}}
	var want []target.Range
	for i := range int64(small) {
		off := i * 32 * kib
		if i < small/2 {
			head.writes[off] = fill(byte('a'+i%20), 8*kib)
		} else {
			snap.writes[off] = fill(byte('A'+i%20), 8*kib)
		}
		want = append(want, target.Range{Off: off, Len: 8 * kib})
	}
	for _, kind := range []loopfs.Kind{loopfs.Ext4, loopfs.XFS} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			mnt := loopfs.Mount(t, kind, 512*mib)
			dir := filepath.Join(mnt, "r")
			writeChainDir(t, dir, size, []layerSpec{head, snap})
			faults := target.NewFaults() // records, fails nothing
			dst := filepath.Join(mnt, "out.img")
			st, err := Export(t.Context(), dir, dst, &ExportOptions{faults: faults})
			require.NoError(t, err)

			got := faults.Ranges(target.OpAllocate)
			if kind == loopfs.Ext4 {
				require.Equal(t, want, got, "each small range allocated, exactly, in file order; the large one not")
			} else {
				require.Empty(t, got, "nothing allocated ahead on %s", kind)
			}
			b, err := os.ReadFile(dst)
			require.NoError(t, err)
			require.EqualValues(t, size, len(b))
			var data int64
			for i := range int64(small) {
				off := i * 32 * kib
				c := byte('a' + i%20)
				if i >= small/2 {
					c = byte('A' + i%20)
				}
				require.Equal(t, fill(c, 8*kib), b[off:off+8*kib], "range %d", i)
				require.Equal(t, make([]byte, 24*kib), b[off+8*kib:off+32*kib], "after range %d", i)
				data += 8 * kib
			}
			require.Equal(t, fill('B', int(big.Len)), b[big.Off:big.End()])
			require.Equal(t, data+big.Len, st.DataBytes)
			f, err := os.Open(dst)
			require.NoError(t, err)
			defer f.Close()
			m, _, err := sparse.ReadMap(context.Background(), dst)
			require.NoError(t, err)
			require.Equal(t, data+big.Len, m.Bytes(), "holes stay holes")
			require.NoError(t, sparse.Fiemap(context.Background(), f, 0, size, func(x sparse.FiemapExtent) error {
				require.Zero(t, x.Flags&sparse.FiemapUnwritten, "an allocated block left unwritten: %+v", x)
				return nil
			}))
		})
	}
}
