package tcpsync

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// TestSessionEndCutsLaterFrames: once a session's context ends (its
// watchdog fired), no frame is read, though readFrame re-arms the idle
// deadline before each one. With only the deadline set to now (serveConn's
// own AfterFunc), a fire that landed between two frames was undone by the
// next frame's re-arm, and a session reading a map, which does not look
// at its context, went on for as long as the peer sent: under -race and
// load, TestClaimsCannotLockOut's server read a claimer's whole map, 16 s
// past its 2 s idle timeout.
func TestSessionEndCutsLaterFrames(t *testing.T) {
	cc, sc := tcpPair(t)
	var err error

	// The server's wiring (serveConn, session).
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	defer context.AfterFunc(ctx, func() { _ = sc.SetDeadline(time.Now()) })()
	server, client := newFramer(sc), newFramer(cc)
	defer server.cutOnDone(ctx)()
	server.setIdle(10 * time.Second)

	require.NoError(t, client.send(wire.Progress, 0, make([]byte, 8)))
	_, _, _, err = server.readFrame()
	require.NoError(t, err)
	cancel() // the watchdog fires
	_, _, _, err = server.readFrame()
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	// The AfterFuncs run on goroutines of their own: the cut may come
	// after the deadline of now, which already failed that read.
	require.Eventually(t, func() bool {
		server.cc.s.mu.Lock()
		defer server.cc.s.mu.Unlock()
		return server.cc.s.cut
	}, 10*time.Second, time.Millisecond, "the session's end never cut its reads")
	// The peer goes on sending: the next frame's re-arm must not let it in.
	require.NoError(t, client.send(wire.Progress, 0, make([]byte, 8)))
	_, _, _, err = server.readFrame()
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "a frame read after the session ended")
}
