package tcpsync

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
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
			started := make(chan int64, 2)
			addr, _ := startServer(t, root, func(s *Server) {
				s.hooks = &testHooks{writebacks: func(n int64) { started <- n }}
			})
			src := filepath.Join(local, "src")
			writeSmallExtents(t, src, tc.extents, 3, false)
			st, err := PushFile(t.Context(), addr, src, "dst.img", clientOpts())
			require.NoError(t, err)
			require.True(t, st.Verified)
			requireSame(t, src, filepath.Join(root, "dst.img"))
			n := <-started // the session's data phase ends after the client's answer
			require.Empty(t, started, "one data phase")
			if tc.atLeast == 0 {
				require.Zero(t, n, "writeback started for less than %d bytes", writebackEvery)
				return
			}
			require.GreaterOrEqual(t, n, tc.atLeast)
		})
	}
}
