package tcpsync

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// gateProxy forwards one connection to target, holding the server's
// bytes once after, bytes have passed until release is closed (paused is
// closed when it holds them).
type gateProxy struct {
	ln              net.Listener
	after           int64
	paused, release chan struct{}
}

func newGateProxy(t *testing.T, target string, after int64) *gateProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &gateProxy{ln: ln, after: after, paused: make(chan struct{}), release: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		s, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		defer s.Close()
		go func() { _, _ = io.Copy(s, c); s.Close() }()
		_, _ = io.CopyN(c, s, after)
		close(p.paused)
		<-p.release
		_, _ = io.Copy(c, s)
	})
	return p
}

// TestTornPullReportsServerReason is issue 23's last lower-severity item:
// a pull whose source the server sees changed during the sync failed, on
// the client, with "reading DATA body: unexpected EOF" (the server's
// writer was cut mid-frame before it could say why). Now the frames in
// flight are finished and the server's ERROR follows: the client reports
// ErrSourceChanged and the server's words.
func TestTornPullReportsServerReason(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, nil)
	src := filepath.Join(root, "img")
	require.NoError(t, writeImage(src, 48<<20, 0.9, 3, 17))
	p := newGateProxy(t, addr, 4<<20)
	o := clientOpts()
	done := make(chan error, 1)
	go func() {
		_, err := Pull(t.Context(), p.ln.Addr().String(), "img", filepath.Join(local, "dst"), o)
		done <- err
	}()
	select {
	case <-p.paused:
	case err := <-done:
		t.Fatalf("the pull ended before the gate: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the pull did not reach the gate")
	}
	// The server is blocked sending; its source is rewritten in place.
	w, err := os.OpenFile(src, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = w.WriteAt(bytes.Repeat([]byte{0x5a}, 4096), 40<<20)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	close(p.release)
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the pull did not end")
	}
	require.ErrorIs(t, err, ErrSourceChanged)
	require.ErrorAs(t, err, new(*RemoteError))
	require.ErrorContains(t, err, "source changed during the sync")
}
