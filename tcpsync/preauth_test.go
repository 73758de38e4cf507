package tcpsync

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// TestPreAuthBudgetSpentExactly: before authentication a peer may send
// budget bytes of frames in all. One that spends the budget to exactly 0
// has its next frame, however small, refused (the budget once read 0 as
// "no limit"); after authentication frames are limited by type only.
func TestPreAuthBudgetSpentExactly(t *testing.T) {
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	peer, f := newFramer(c), newFramer(s)
	const body = 100
	f.preAuth, f.budget = true, wire.HeaderLen+body
	go func() {
		_ = peer.send(wire.Hello, 0, make([]byte, body))
		_ = peer.send(wire.Hello, 0)
		_ = peer.send(wire.Hello, 0)
	}()
	_, _, b, err := f.readFrame()
	require.NoError(t, err)
	require.Len(t, b, body)
	require.Zero(t, f.budget)
	_, _, _, err = f.readFrame()
	require.ErrorIs(t, err, ErrFrameTooLarge, "a frame past a spent budget")

	f.preAuth = false // authenticated
	_, _, _, err = f.readFrame()
	require.NoError(t, err)
}
