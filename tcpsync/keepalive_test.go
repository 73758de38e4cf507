package tcpsync

import (
	"encoding/binary"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/sparse"
)

// TestLongReadBackStaysAlive is issue 26's "long phases never look idle"
// for the read-back: the receiver (a pulling client here) reads its target
// back slowly (each read of up to 4 MiB held 0.2 s by a test hook, more
// than three idle timeouts in all) with idle timeouts of 1 s on both sides. Its reads are progress for
// its own watchdog, and its PROGRESS frames keep the server's sender (its
// read deadline and its watchdog) alive: the pull succeeds, verified and
// read back, where a read-back longer than the idle timeout used to fail.
func TestLongReadBackStaysAlive(t *testing.T) {
	const idle = time.Second
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, func(s *Server) { s.IdleTimeout = idle })
	src := filepath.Join(root, "img")
	require.NoError(t, writeImage(src, 64<<20, 0.5, 4, 26))
	var reads, first, last atomic.Int64
	o := clientOpts()
	o.IdleTimeout, o.ReadBack = idle, ReadBackOn
	o.hooks = &testHooks{afterReadBackRead: func() {
		reads.Add(1)
		first.CompareAndSwap(0, time.Now().UnixNano())
		time.Sleep(200 * time.Millisecond)
		last.Store(time.Now().UnixNano())
	}}
	dst := filepath.Join(local, "dst")
	start := time.Now()
	st, err := Pull(t.Context(), addr, "img", dst, o)
	require.NoError(t, err)
	took := time.Since(start)
	lasted := time.Duration(last.Load() - first.Load())
	t.Logf("pull with a slowed read-back: %v (read-back %v in %d reads, %d bytes)", took, lasted, reads.Load(), st.ReadBackBytes)
	require.True(t, st.Verified && st.ReadBack)
	require.Equal(t, 1, st.Attempts)
	require.Greater(t, lasted, 3*idle, "the read-back outlasted three idle timeouts")
	requireSame(t, src, dst)
}

// TestProgressFramesChecked: a receiver's PROGRESS frames cannot buy a
// sender time it did not announce or earn: only after DONE, from a peer
// with featKeepalive, counting up, never past the source's data.
func TestProgressFramesChecked(t *testing.T) {
	m, err := sparse.NewMap(4<<20, sparse.Extent{Off: 0, Len: 1 << 20})
	require.NoError(t, err)
	s := &sender{f: &framer{keepalive: true}, plan: &plan{blocks: m}}
	body := func(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }
	require.ErrorIs(t, s.onProgress(body(4096)), ErrProtocol, "before DONE")
	s.doneSent.Store(true)
	require.NoError(t, s.onProgress(body(512<<10)))
	require.ErrorIs(t, s.onProgress(body(256<<10)), ErrProtocol, "counting down")
	require.ErrorIs(t, s.onProgress(body(2<<20)), ErrProtocol, "past the data")
	require.NoError(t, s.onProgress(body(1<<20)))
	s.f.keepalive = false
	require.ErrorIs(t, s.onProgress(body(1<<20)), ErrProtocol, "not announced")
}
