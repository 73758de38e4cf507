package tcpsync

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	wtarget "github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/sparse"
)

// TestReceiverAllocatesSmallExtentsAhead: a receiver on ext4 allocates each
// small source extent's blocks, exactly, in file order, before it writes
// them (target.File.AllocateAhead: ext4 otherwise scatters them on the
// device, and every extent costs its own write request); a large extent
// it leaves to the filesystem; on XFS it allocates nothing ahead. The
// kernel's map of the target afterwards holds no unwritten block (all that
// was allocated was written), and the copy is exact.
func TestReceiverAllocatesSmallExtentsAhead(t *testing.T) {
	const (
		kib   = 1 << 10
		mib   = 1 << 20
		small = 1500 // 4 KiB every 64 KiB
	)
	l := layout.Layout{Name: "small-and-large", Size: small*64*kib + 8*mib}
	for i := range int64(small) {
		l.Data = append(l.Data, layout.Range{Off: i * 64 * kib, Len: 4 * kib})
	}
	l.Data = append(l.Data, layout.Range{Off: small*64*kib + 2*mib, Len: 4 * mib})
	for _, kind := range []loopfs.Kind{loopfs.Ext4, loopfs.XFS} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			dir := loopfs.Mount(t, kind, 512*mib)
			root := filepath.Join(dir, "root")
			require.NoError(t, os.MkdirAll(root, 0o755))
			faults := wtarget.NewFaults() // records the allocations, fails nothing
			var ends <-chan SessionEvent
			addr, _ := startServer(t, root, func(s *Server) {
				ends = sessionEnds(s)
				s.faults = faults
			})
			src, dst := filepath.Join(dir, "src"), filepath.Join(root, "dst.img")
			layout.Create(t, src, l)
			st, err := PushFile(t.Context(), addr, src, "dst.img", clientOpts())
			require.NoError(t, err)
			require.True(t, st.Verified)
			waitSessions(t, ends, 1, time.Minute)
			requireSame(t, src, dst)

			var got []layout.Range
			for _, r := range faults.Ranges(wtarget.OpAllocate) {
				got = append(got, layout.Range{Off: r.Off, Len: r.Len})
			}
			if kind != loopfs.Ext4 {
				require.Empty(t, got, "nothing allocated ahead on %s", kind)
				return
			}
			require.Equal(t, l.Data[:small], got, "each small extent allocated, exactly, in file order; the large one not")
			f, err := os.Open(dst)
			require.NoError(t, err)
			defer f.Close()
			require.NoError(t, sparse.Fiemap(context.Background(), f, 0, l.Size, func(x sparse.FiemapExtent) error {
				require.Zero(t, x.Flags&sparse.FiemapUnwritten, "an allocated block left unwritten: %+v", x)
				return nil
			}))
		})
	}
}
