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
// was allocated was written), and the copy is exact. A re-sync allocates
// only its first-pass writes: a new extent where the target had a hole,
// not the fix-ups of changed blocks the target held.
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
			requireAllWritten(t, dst, l.Size)

			// Re-sync: 40 small extents changed (fix-ups of compare
			// blocks) and one new 8 KiB extent in a hole (first pass).
			sf, err := os.OpenFile(src, os.O_RDWR, 0)
			require.NoError(t, err)
			b := make([]byte, 4*kib)
			for i := range b {
				b[i] = 0xc3
			}
			for i := int64(0); i < 40; i++ {
				_, err := sf.WriteAt(b, i*37*64*kib)
				require.NoError(t, err)
			}
			fresh := layout.Range{Off: 700*64*kib + 16*kib, Len: 8 * kib}
			for o := fresh.Off; o < fresh.Off+fresh.Len; o += 4 * kib {
				_, err := sf.WriteAt(b, o)
				require.NoError(t, err)
			}
			require.NoError(t, sf.Close())
			before := len(faults.Ranges(wtarget.OpAllocate))
			st, err = PushFile(t.Context(), addr, src, "dst.img", clientOpts())
			require.NoError(t, err)
			require.True(t, st.Verified)
			waitSessions(t, ends, 1, time.Minute)
			requireSame(t, src, dst)
			require.Positive(t, st.CopiedBytes)
			var again []layout.Range
			for _, r := range faults.Ranges(wtarget.OpAllocate)[before:] {
				again = append(again, layout.Range{Off: r.Off, Len: r.Len})
			}
			require.Equal(t, []layout.Range{fresh}, again, "only the new extent allocated ahead; no fix-up")
			requireAllWritten(t, dst, l.Size)
		})
	}
}

// requireAllWritten fails if the kernel's map of path holds an unwritten
// (allocated, never written) block.
func requireAllWritten(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, sparse.Fiemap(context.Background(), f, 0, size, func(x sparse.FiemapExtent) error {
		require.Zero(t, x.Flags&sparse.FiemapUnwritten, "an allocated block left unwritten: %+v", x)
		return nil
	}))
}
