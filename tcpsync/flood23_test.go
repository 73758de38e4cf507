package tcpsync

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSilentFloodFromManyAddresses is hole 1: 2,000 connections that send
// nothing, from more than 64 addresses, made every legitimate push fail
// within a second ("the server hung up before greeting"), with no retry:
// admission evicted the oldest pending connection when every address had
// about one, which was the fresh legitimate one, and the client took the
// hang-up (or, under TLS, the bare close) as permanent. Here 1,200 silent
// connections from 120 loopback addresses (127.0.0.2-121), dialed by 8
// goroutines and held open, meet 4 pushes from 127.0.0.1 started while
// the flood is under way, plaintext and TLS: all succeed. The flood is
// bounded in count (1,200) and time (20 s).
func TestSilentFloodFromManyAddresses(t *testing.T) {
	for _, mode := range []string{"plaintext", "TLS"} {
		t.Run(mode, func(t *testing.T) { silentFlood(t, mode == "TLS") })
	}
}

func silentFlood(t *testing.T, useTLS bool) {
	const (
		floodConns = 1200
		floodHosts = 120
		pushes     = 4
	)
	root, local := t.TempDir(), t.TempDir()
	var cliTLS *tls.Config
	addr, srv := startServer(t, root, func(s *Server) {
		if useTLS {
			var srvTLS *tls.Config
			srvTLS, cliTLS = testTLS(t)
			s.TLSConfig = srvTLS
		}
	})
	srcs := make([]string, pushes)
	for i := range srcs {
		srcs[i] = filepath.Join(local, fmt.Sprint("src", i))
		require.NoError(t, writeImage(srcs[i], 8<<20, 0.5, 4, uint64(40+i)))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var conns []net.Conn
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	var dialed, failed atomic.Int64
	floodCtx, stopFlood := context.WithTimeout(ctx, 20*time.Second)
	defer stopFlood()
	started := make(chan struct{})
	var once sync.Once
	var fw sync.WaitGroup
	for g := range 8 {
		fw.Go(func() {
			for i := g; i < floodConns && floodCtx.Err() == nil; i += 8 {
				c, err := dialFrom(floodCtx, 2+i%floodHosts, addr)
				if err != nil {
					failed.Add(1)
					continue
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				if dialed.Add(1) == floodConns/4 {
					once.Do(func() { close(started) })
				}
			}
		})
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the flood did not start")
	}

	type result struct {
		took     time.Duration
		attempts int
		err      error
	}
	res := make([]result, pushes)
	var pw sync.WaitGroup
	for i := range pushes {
		pw.Go(func() {
			o := clientOpts()
			o.MaxAttempts, o.MinBackoff, o.MaxBackoff = 9, 200*time.Millisecond, 2*time.Second
			o.TLSConfig = cliTLS
			o.Dial = func(ctx context.Context, _, a string) (net.Conn, error) { return dialFrom(ctx, 1, a) }
			start := time.Now()
			st, err := PushFile(ctx, addr, srcs[i], fmt.Sprint("img", i), o)
			res[i] = result{time.Since(start), st.Attempts, err}
		})
	}
	pw.Wait()
	during := dialed.Load()
	fw.Wait()

	pending := srv.pendingLen()
	t.Logf("flood: %d silent connections held from %d addresses (%d dialed while the pushes ran, %d dials failed); "+
		"server: %d pending at the end", dialed.Load(), floodHosts, during, failed.Load(), pending)
	for i, r := range res {
		t.Logf("push %d (%s): %v, %d attempt(s), err %v", i, map[bool]string{false: "plaintext", true: "TLS"}[useTLS], r.took.Round(time.Millisecond), r.attempts, r.err)
	}
	require.GreaterOrEqual(t, dialed.Load(), int64(1000), "the flood reached 1,000 connections")
	for i, r := range res {
		require.NoError(t, r.err, "push %d during the flood", i)
		requireSame(t, srcs[i], filepath.Join(root, fmt.Sprint("img", i)))
	}
	require.LessOrEqual(t, pending, srv.MaxPreAuth, "silent connections stay within MaxPreAuth")
}

// TestBuffersAtAuthentication is hole 1's memory half: each admitted,
// not yet authenticated connection had 2 × 256 KiB of buffers (a
// plaintext flood drove the server to 198-313 MB). Now a framer starts
// with 4 KiB each way and grows at authentication: 64 silent pending
// connections grow the heap by well under the 32 MiB they used to take,
// and a framer's buffers are small until its handshake ends.
func TestBuffersAtAuthentication(t *testing.T) {
	addr, srv := startServer(t, t.TempDir(), func(s *Server) { s.HandshakeTimeout = time.Minute })
	stop := heapWatch(t)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 64 {
		c, err := dialFrom(t.Context(), 2+i%16, addr)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	require.Eventually(t, func() bool { return srv.pendingLen() == 64 }, 20*time.Second, time.Millisecond)
	// Each connection's goroutine is reading (its framer made).
	require.Eventually(t, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for e := srv.pending.Front(); e != nil; e = e.Next() {
			if e.Value.(*tracked).w.waiting.Load() == 0 {
				return false
			}
		}
		return true
	}, 20*time.Second, time.Millisecond)
	grew := stop()
	t.Logf("heap growth for 64 silent pending connections: %d KiB", grew>>10)
	require.Less(t, grew, uint64(8<<20))

	other, _ := startServer(t, t.TempDir(), nil)
	f, _ := rawSession(t, other, testToken)
	require.Equal(t, sessionBuf, f.r.Size(), "grown at authentication")
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	require.Equal(t, preAuthBuf, newFramer(c).r.Size())
}

// TestUngreetedNeverEvicted: with the pending budget full of connections
// that have not yet had greetGrace to speak, a newcomer is refused rather
// than one of them closed; once they have waited it, a newcomer takes
// the place of one of them. A newcomer that already spoke is admitted
// beyond MaxPreAuth (within MaxConns) either way.
func TestUngreetedNeverEvicted(t *testing.T) {
	open := func(c net.Conn) bool { // not closed by the server
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return errors.Is(err, os.ErrDeadlineExceeded)
	}
	for _, grace := range []time.Duration{time.Hour, 50 * time.Millisecond} {
		addr, srv := startServer(t, t.TempDir(), func(s *Server) {
			s.MaxPreAuth, s.HandshakeTimeout, s.greetGrace = 2, time.Minute, grace
		})
		var held []net.Conn
		for i := range 2 {
			c, err := dialFrom(t.Context(), 2+i, addr)
			require.NoError(t, err)
			defer c.Close()
			held = append(held, c)
		}
		require.Eventually(t, func() bool { return srv.pendingLen() == 2 }, 20*time.Second, time.Millisecond)
		time.Sleep(2 * grace % time.Second) // the short grace has passed
		c, err := dialFrom(t.Context(), 9, addr)
		require.NoError(t, err)
		defer c.Close()
		if grace == time.Hour {
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			b, _ := io.ReadAll(c)
			require.Equal(t, refusal(), b, "the silent newcomer is refused")
			require.True(t, open(held[0]) && open(held[1]), "no connection evicted before its grace")
		} else {
			require.True(t, open(c), "the newcomer got a place")
			require.False(t, open(held[0]) && open(held[1]), "a silent one made room")
		}
		// A newcomer that spoke gets in even while they are in grace.
		f, _ := rawSession(t, addr, testToken)
		require.NotNil(t, f)
	}
}

// pendingLen is the server's count of pending connections.
func (s *Server) pendingLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending.Len()
}
