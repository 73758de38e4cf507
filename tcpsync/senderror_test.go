package tcpsync

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// TestErrorAfterDroppedFramesKeepsItsTag: a session whose writes were cut
// (its write deadline passed) with a tagged frame still in the buffer
// sends its ERROR under the sequence number the peer expects, so the peer
// reads the error (here ErrShutdown) and not a forged frame
// (ErrIntegrity). Seen under load: a push whose server shut down right
// after queuing DSTINFO failed as tampered with, which is never retried.
func TestErrorAfterDroppedFramesKeepsItsTag(t *testing.T) {
	cc, sc := tcpPair(t)
	var err error

	server, client := newFramer(sc), newFramer(cc)
	transcript := []byte("a transcript both sides hold")
	require.NoError(t, server.authenticate(testToken, transcript, false))
	require.NoError(t, client.authenticate(testToken, transcript, true))

	require.NoError(t, server.send(wire.Opened, 0))
	_, _, err = client.expect(wire.Opened)
	require.NoError(t, err)

	// The session is cut: its next frame is tagged, then dropped unsent.
	require.NoError(t, sc.SetWriteDeadline(time.Now().Add(-time.Second)))
	require.Error(t, server.send(wire.DstInfo, 0, make([]byte, 17)))
	server.sendError(ErrShutdown)

	require.NoError(t, cc.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, _, err = client.expect(wire.DstInfo)
	require.False(t, errors.Is(err, ErrIntegrity), "the ERROR read as a forged frame: %v", err)
	require.ErrorIs(t, err, ErrShutdown)
}

// tcpPair returns both ends of a TCP connection over 127.0.0.1 (a port
// the kernel chose), closed when the test ends.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	cc, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	sc := <-accepted
	t.Cleanup(func() { sc.Close() })
	return cc, sc
}
