package tcpsync

import (
	"encoding/binary"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
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
	t.Parallel() // it waits on slowed storage or a rate: beside the other waiting tests
	const idle = time.Second
	root, local := t.TempDir(), t.TempDir()
	var ends <-chan SessionEvent
	addr, _ := startServer(t, root, func(s *Server) { ends = sessionEnds(s); s.IdleTimeout = idle })
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
	require.NoError(t, waitSessions(t, ends, 1, time.Minute)[0].Err, "the server's session")
	requireSame(t, src, dst)
}

// TestProgressFramesChecked: a receiver's PROGRESS frames cannot buy a
// sender time it did not announce or earn: only after DONE, from a peer
// with wire.FeatKeepalive, counting up, never past the source's data.
func TestProgressFramesChecked(t *testing.T) {
	m, err := sparse.NewMap(4<<20, sparse.Extent{Off: 0, Len: 1 << 20})
	require.NoError(t, err)
	s := &sender{f: &framer{keepalive: true}, plan: &plan{blocks: m}, dataTotal: m.Bytes()}
	body := func(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }
	require.ErrorIs(t, s.onProgress(0, body(4096)), ErrProtocol, "before DONE")
	s.doneSent.Store(true)
	require.NoError(t, s.onProgress(0, body(512<<10)))
	require.ErrorIs(t, s.onProgress(0, body(256<<10)), ErrProtocol, "counting down")
	require.ErrorIs(t, s.onProgress(0, body(2<<20)), ErrProtocol, "past the data")
	require.NoError(t, s.onProgress(0, body(1<<20)))
	s.f.keepalive = false
	require.ErrorIs(t, s.onProgress(0, body(1<<20)), ErrProtocol, "not announced")
	require.ErrorIs(t, s.onProgress(wire.FlagWorked|2, body(0)), ErrProtocol, "unknown flags")
}

// TestWorkedFramesChecked: PROGRESS of work (a receiver waiting on its
// budget) is taken any time from a peer with wire.FeatWorked, counting up,
// never past twice the source's data plus what was sent to it; only what
// it adds is progress.
func TestWorkedFramesChecked(t *testing.T) {
	m, err := sparse.NewMap(4<<20, sparse.Extent{Off: 0, Len: 1 << 20})
	require.NoError(t, err)
	wd := &watchdog{}
	s := &sender{f: &framer{wd: wd, out: new(counter)}, plan: &plan{blocks: m}, dataTotal: m.Bytes()}
	s.f.out.n.Store(100) // sent so far
	body := func(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }
	require.ErrorIs(t, s.onProgress(wire.FlagWorked, body(4096)), ErrProtocol, "not announced")
	s.f.worked = true
	require.NoError(t, s.onProgress(wire.FlagWorked, body(512<<10)), "before DONE")
	require.Equal(t, int64(512<<10), wd.moved.Load())
	require.ErrorIs(t, s.onProgress(wire.FlagWorked, body(256<<10)), ErrProtocol, "counting down")
	require.ErrorIs(t, s.onProgress(wire.FlagWorked, body(2<<20+101)), ErrProtocol, "past twice the data and what was sent")
	s.doneSent.Store(true)
	require.NoError(t, s.onProgress(wire.FlagWorked, body(2<<20+100)), "after DONE")
	require.Equal(t, int64(2<<20+100), wd.moved.Load(), "progress is what the frames add")
	require.Zero(t, s.readBackSeen, "work is no read-back")
}

// TestLongAtomicReadBackStaysAlive is issue 26's acceptance for `push
// --atomic` and `pull --atomic` (read-back by default): the receiver (the
// server for a push, the client for a pull) reads back for more than three
// idle timeouts of 1 s on both sides, and the sync succeeds, verified, read
// back and atomic, at its first attempt.
func TestLongAtomicReadBackStaysAlive(t *testing.T) {
	t.Parallel() // it waits on slowed storage or a rate: beside the other waiting tests
	const idle = time.Second
	for _, push := range []bool{true, false} {
		name := map[bool]string{true: "push", false: "pull"}[push]
		t.Run(name, func(t *testing.T) {
			root, local := t.TempDir(), t.TempDir()
			hooks, lasted := slowReadBack(200 * time.Millisecond)
			var ends <-chan SessionEvent
			addr, _ := startServer(t, root, func(s *Server) {
				ends = sessionEnds(s)
				s.IdleTimeout = idle
				if push {
					s.hooks = hooks
				}
			})
			o := clientOpts()
			o.IdleTimeout, o.Atomic = idle, true
			var st Stats
			var err error
			src, dst := filepath.Join(local, "img"), filepath.Join(root, "img")
			if push {
				require.NoError(t, writeImage(src, 64<<20, 0.5, 4, 27))
				st, err = PushFile(t.Context(), addr, src, "img", o)
			} else {
				src, dst = dst, src
				require.NoError(t, writeImage(src, 64<<20, 0.5, 4, 27))
				o.hooks = hooks
				st, err = Pull(t.Context(), addr, "img", dst, o)
			}
			require.NoError(t, err)
			t.Logf("%s --atomic with a slowed read-back of %v (%d bytes)", name, lasted(), st.ReadBackBytes)
			require.True(t, st.Verified)
			require.Equal(t, 1, st.Attempts)
			require.Greater(t, lasted(), 3*idle, "the read-back outlasted three idle timeouts")
			ev := waitSessions(t, ends, 1, time.Minute)[0]
			require.NoError(t, ev.Err, "the server's session")
			requireSame(t, src, dst)
		})
	}
}
