package tcpsync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGroupPrefersThePeersReason: the first error ends a group, except that
// a peer's ERROR read after the connection failed under a write replaces
// that failure (the peer said why, then closed); it replaces nothing else.
func TestGroupPrefersThePeersReason(t *testing.T) {
	pipe := fmt.Errorf("writing DATA: %w", syscall.EPIPE)
	remote := &RemoteError{Code: 1, Msg: "no space left on device"}
	local := errors.New("local failure")
	for _, tc := range []struct {
		errs []error
		want error
	}{
		{[]error{pipe, remote}, remote},
		{[]error{remote, pipe}, remote},
		{[]error{local, remote}, local},
		{[]error{pipe, local}, pipe},
	} {
		g, ctx := newGroup(t.Context())
		for _, err := range tc.errs {
			g.Go(func() error { return err })
			g.wg.Wait() // in this order
		}
		require.Same(t, tc.want, g.Wait(), "errors %v", tc.errs)
		require.Same(t, tc.errs[0], context.Cause(ctx), "the first error cancels")
	}
}

// TestUnblockLeavesReadsToAClosedPeer: when a session ends because the
// peer closed the connection (a write failed with EPIPE), the reader is not
// cut: what the peer sent before closing (its ERROR) can still be read. Any
// other cause cuts reads at once.
func TestUnblockLeavesReadsToAClosedPeer(t *testing.T) {
	for _, tc := range []struct {
		cause    error
		readable bool
	}{
		{fmt.Errorf("writing DATA: %w", syscall.EPIPE), true},
		{errors.New("local failure"), false},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		peer, err := ln.Accept()
		require.NoError(t, err)
		defer peer.Close()

		ctx, cancel := context.WithCancelCause(t.Context())
		defer unblock(ctx, c)()
		cancel(tc.cause)
		// Every cause cuts writes: once a write fails, unblock has acted.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := c.Write([]byte{0})
			if err != nil {
				require.ErrorIs(t, err, os.ErrDeadlineExceeded)
				break
			}
			require.True(t, time.Now().Before(deadline), "unblock never cut the writes")
			time.Sleep(time.Millisecond)
		}
		_, err = peer.Write([]byte("reason"))
		require.NoError(t, err)
		b := make([]byte, 6)
		_, err = io.ReadFull(c, b)
		if tc.readable {
			require.NoError(t, err, "cause %v", tc.cause)
			require.Equal(t, "reason", string(b))
		} else {
			require.ErrorIs(t, err, os.ErrDeadlineExceeded, "cause %v", tc.cause)
		}
	}
}
