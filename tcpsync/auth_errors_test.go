package tcpsync

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// handshakeWith runs the server's handshake against a client that sends
// HELLO and then, instead of its proof, the frame send writes; it returns
// the server's error.
func handshakeWith(t *testing.T, send func(f *framer) error) error {
	t.Helper()
	sc, cc := net.Pipe()
	t.Cleanup(func() { sc.Close(); cc.Close() })
	require.NoError(t, sc.SetDeadline(time.Now().Add(time.Minute)))
	require.NoError(t, cc.SetDeadline(time.Now().Add(time.Minute)))
	done := make(chan error, 1)
	go func() {
		_, err := serverHandshake(context.Background(), newFramer(sc), testToken, false, 0)
		sc.Close()
		done <- err
	}()
	f := newFramer(cc)
	require.NoError(t, f.send(wire.Hello, 0, wire.NewHello(0).Marshal()))
	_, _, err := f.expect(wire.Hello)
	require.NoError(t, err)
	require.NoError(t, send(f))
	return <-done
}

// TestHandshakeOtherFrameIsUnauthorized: a client that skips its proof and
// sends another frame is refused as unauthorized (it is counted as a failed
// login) and as a protocol violation.
func TestHandshakeOtherFrameIsUnauthorized(t *testing.T) {
	err := handshakeWith(t, func(f *framer) error {
		return f.send(wire.Open, 0, openBody(opPush, 0, 4096, "x"))
	})
	require.ErrorIs(t, err, ErrUnauthorized)
	require.ErrorIs(t, err, ErrProtocol)
}

// TestHandshakeClientErrorIsNotALogin: a client that gives up with an
// ERROR frame instead of its proof is the client's error, whatever its
// text says ("got" was once matched in it), never a failed login.
func TestHandshakeClientErrorIsNotALogin(t *testing.T) {
	err := handshakeWith(t, func(f *framer) error {
		f.sendError(errors.New("client got tired: bye"))
		return nil
	})
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrUnauthorized)
	require.ErrorContains(t, err, "client got tired")
}
