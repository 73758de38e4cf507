package tcpsync

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// wideSource claims more data extents than one map may carry; its bytes
// are never read (the refusal comes first).
type wideSource struct{ n int }

func (s wideSource) Size() int64 { return int64(s.n) * 8192 }

func (s wideSource) ReadAt(b []byte, off int64) (int, error) { clear(b); return len(b), nil }

func (s wideSource) Extents(context.Context) (sparse.Map, error) {
	xs := make([]sparse.Extent, s.n)
	for i := range xs {
		xs[i] = sparse.Extent{Off: int64(i) * 8192, Len: 4096}
	}
	return sparse.NewMap(s.Size(), xs...)
}

// TestTooManyExtentsSaidAtOnce: to an older peer (no wire.FeatWideMaps, played
// by the client here) a source with more extents than its map limit fails
// its push at the first attempt, with the limit and the way around it in
// the error, and is not retried (issue 26: it used to be retried 5 times
// over 27 s before the server's refusal was shown).
func TestTooManyExtentsSaidAtOnce(t *testing.T) {
	root := t.TempDir()
	var ends <-chan SessionEvent
	addr, _ := startServer(t, root, func(s *Server) { ends = sessionEnds(s) })
	o := clientOpts()
	o.MaxAttempts = 4
	var r retries
	o.OnRetry = r.on
	o.hooks = &testHooks{narrowMaps: true}
	st, err := Push(t.Context(), addr, wideSource{n: wire.MaxExtents + 1}, "wide.img", o)
	require.ErrorIs(t, err, ErrTooManyExtents)
	require.ErrorContains(t, err, "1048577 data extents, and one map carries at most 1048576 to this peer (an older sparsesync, without wide maps): upgrade the peer, copy it with sparsesync local")
	require.Empty(t, r.errs, "a permanent refusal is not retried")
	require.LessOrEqual(t, st.Attempts, 1)
	waitSessions(t, ends, 1, time.Minute) // the server's side of the one session has ended
	require.NoFileExists(t, filepath.Join(root, "wide.img"), "an abandoned push leaves no file")
}

// TestOlderPeerKeepsWholeMaps: a client without wire.FeatWindows (an older
// peer, played here) gets today's behaviour exactly: whole maps up front,
// within the server's session budget. With a small budget (18 MiB) a map
// of 100,000 extents is refused at once, naming the budget and the way
// around it, and not retried; a short map goes through. The same map
// pushes, verified, between peers that take maps in windows.
func TestOlderPeerKeepsWholeMaps(t *testing.T) {
	root := t.TempDir()
	addr, _ := startServer(t, root, func(s *Server) { s.MaxSessionMemory = 18 << 20 })
	src := wideSource{n: 100_000}
	require.Greater(t, int64(src.n)*extentCost, int64(18<<20-sessionFixed), "the map whole is over the budget")

	old := clientOpts()
	old.MaxAttempts = 4
	var r retries
	old.OnRetry = r.on
	old.hooks = &testHooks{noWindows: true}
	_, err := Push(t.Context(), addr, src, "old.img", old)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	require.ErrorContains(t, err, "over the session's memory budget of 18 MiB")
	require.ErrorContains(t, err, "Server.MaxSessionMemory")
	require.Empty(t, r.errs, "a permanent refusal is not retried")
	st, err := Push(t.Context(), addr, wideSource{n: 1000}, "short.img", old)
	require.NoError(t, err)
	require.True(t, st.Verified)

	st, err = Push(t.Context(), addr, src, "new.img", clientOpts())
	require.NoError(t, err)
	require.True(t, st.Verified)
	require.Equal(t, src.Size(), st.Size)
}
