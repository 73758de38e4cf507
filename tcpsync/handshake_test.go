package tcpsync

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// helloOnly dials addr and exchanges HELLOs by hand: when it returns, the
// server has accepted and counted the connection, which then says nothing.
func helloOnly(t *testing.T, addr string) (*framer, []byte, []byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
	f := newFramer(c)
	ch := wire.NewHello(0).Marshal()
	require.NoError(t, f.send(wire.Hello, 0, ch))
	_, sb, err := f.expect(wire.Hello)
	require.NoError(t, err)
	return f, ch, bytes.Clone(sb)
}

// TestWrongClientProofAlone: a client that holds everything but the token
// sends a proof of the right length over the right transcript, keyed
// wrongly. Only the server's proof check stands between it and a session:
// it must refuse with the wrong-proof error and never answer with its own
// proof or accept an OPEN.
func TestWrongClientProofAlone(t *testing.T) {
	root := t.TempDir()
	addr, _ := startServer(t, root, nil)
	f, ch, sh := helloOnly(t, addr)
	tr := transcript(f, ch, sh)
	wrong := wire.Proof([]byte("not-the-token-but-as-long-as-one-0123456789"), "client", tr)
	require.Len(t, wrong, len(wire.Proof(testToken, "client", tr)))
	require.NoError(t, f.send(wire.Auth, 0, wrong))
	_, _, err := f.expect(wire.Auth)
	require.ErrorIs(t, err, ErrUnauthorized)
	require.ErrorContains(t, err, "wrong client proof")
	// Nothing after it is served.
	_ = f.send(wire.Open, 0, openBody(opPush, 0, 4096, "x"))
	_, _, err = f.expect(wire.Opened)
	require.Error(t, err)
	require.NoFileExists(t, root+"/x")

	// The right proof over the same kind of transcript is accepted: the
	// refusal above was the proof's, not the frames'.
	f, ch, sh = helloOnly(t, addr)
	tr = transcript(f, ch, sh)
	require.NoError(t, f.send(wire.Auth, 0, wire.Proof(testToken, "client", tr)))
	_, sp, err := f.expect(wire.Auth)
	require.NoError(t, err)
	require.Equal(t, wire.Proof(testToken, "server", tr), sp)
}
