package tcpsync

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	wtarget "github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/wire"
)

// TestReceiverStartsWriteback: a receiver writing many small extents starts
// the target's writeback while it writes (every writebackEvery bytes, from
// its own goroutine), so that its checkpoints' fdatasyncs do not do all of
// the disk's work with the stream stopped; a small push starts none; both
// targets are exact, holes included.
func TestReceiverStartsWriteback(t *testing.T) {
	for _, tc := range []struct {
		name    string
		extents int
		atLeast int64
	}{
		{"6000 extents, 23 MiB of data", 6000, 1},
		{"100 extents", 100, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, local := t.TempDir(), t.TempDir()
			faults := wtarget.NewFaults() // counts the writeback starts
			var ends <-chan SessionEvent
			addr, _ := startServer(t, root, func(s *Server) {
				ends = sessionEnds(s)
				s.faults = faults
			})
			src := filepath.Join(local, "src")
			writeSmallExtents(t, src, tc.extents, 3, false)
			st, err := PushFile(t.Context(), addr, src, "dst.img", clientOpts())
			require.NoError(t, err)
			require.True(t, st.Verified)
			requireSame(t, src, filepath.Join(root, "dst.img"))
			waitSessions(t, ends, 1, time.Minute) // its data phase ends after the client's answer
			n := int64(faults.Calls(wtarget.OpWriteback))
			if tc.atLeast == 0 {
				require.Zero(t, n, "writeback started for less than %d bytes", writebackEvery)
				return
			}
			require.GreaterOrEqual(t, n, tc.atLeast)
		})
	}
}

// TestReceiverReadsSmallExtentsTogether: a re-sync onto a target of many
// small extents reads the target's compare blocks with neighbouring
// extents joined (holes of up to sparse.ReadGap read through, up to 1 MiB a
// read), not with a read per extent, and the result is exact.
func TestReceiverReadsSmallExtentsTogether(t *testing.T) {
	const n = 3000 // 4 KiB every 8 KiB: 24 MiB
	root, local := t.TempDir(), t.TempDir()
	var mu sync.Mutex
	var reads, bytes int64
	addr, _ := startServer(t, root, func(s *Server) {
		s.hooks = &testHooks{targetRead: func(b int64) {
			mu.Lock()
			reads, bytes = reads+1, bytes+b
			mu.Unlock()
		}}
	})
	src, dst := filepath.Join(local, "src"), filepath.Join(root, "dst.img")
	writeSmallExtents(t, src, n, 5, false)
	o := clientOpts()
	_, err := PushFile(t.Context(), addr, src, "dst.img", o)
	require.NoError(t, err)
	mutate(t, src, 30, 7)
	o.FullCompare = true // compare every block, whatever the sidecar says
	st, err := PushFile(t.Context(), addr, src, "dst.img", o)
	require.NoError(t, err)
	require.True(t, st.Verified)
	requireSame(t, src, dst)
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, bytes, int64(n-30)*4096, "the compare blocks were read")
	require.LessOrEqual(t, reads, int64(2*n*8192/wire.MaxDataPayload), "%d reads for %d extents", reads, n)
}
