package tcpsync

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// This file holds a small hand-built-frame client and a hostile server, and
// the tests of issue 12's network holes: each reproduces the attack frame
// by frame and checks that it now holds.

// sessionEnds returns a channel that receives every finished session of
// srv (it must be set before the server starts).
func sessionEnds(s *Server) <-chan SessionEvent {
	ch := make(chan SessionEvent, 1024)
	s.OnSession = func(ev SessionEvent) { ch <- ev }
	return ch
}

// waitSessions waits for n sessions to end, failing after limit (a bound
// on a hang, not a timing assertion).
func waitSessions(t *testing.T, ch <-chan SessionEvent, n int, limit time.Duration) []SessionEvent {
	t.Helper()
	var out []SessionEvent
	tm := time.NewTimer(limit)
	defer tm.Stop()
	for len(out) < n {
		select {
		case ev := <-ch:
			out = append(out, ev)
		case <-tm.C:
			t.Fatalf("%d of %d sessions ended within %v: the rest are stuck", len(out), n, limit)
		}
	}
	return out
}

// mapFrames sends m as EXTENTS frames.
func sendMapRaw(t *testing.T, f *framer, m sparse.Map) {
	t.Helper()
	require.NoError(t, sendMap(f, m))
	require.NoError(t, f.flush())
}

func srcInfoBody(size uint64, bs uint32, ident string) []byte {
	b := binary.LittleEndian.AppendUint64(nil, size)
	b = binary.LittleEndian.AppendUint32(b, bs)
	b = binary.LittleEndian.AppendUint32(b, 0)
	return wire.AppendBytes(b, []byte(ident))
}

func dstInfoBody(size uint64, resume uint64) []byte {
	b := binary.LittleEndian.AppendUint64(nil, size)
	b = append(b, 0)
	return binary.LittleEndian.AppendUint64(b, resume)
}

// activeSessions is the server's count of authenticated sessions.
func (s *Server) activeSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions
}

// TestEarlyDoneAckEndsPull is hole 1 as reported: OPEN pull, DSTINFO with
// the source's size and the source's own map (every block compared, so the
// producer waits for answers), DONEACK of 24 zero bytes, close after 0.5 s.
// The session must end, and free its slot, long before the idle timeout.
func TestEarlyDoneAckEndsPull(t *testing.T) {
	root := t.TempDir()
	src := writeLayout(t, root, "img", layout.Layout{Size: 64 << 20, Data: layout.Ranges(0, 64<<20)})
	var ends <-chan SessionEvent
	addr, srv := startServer(t, root, func(s *Server) {
		s.IdleTimeout = 10 * time.Minute // the fix, not the timeout, must end it
		ends = sessionEnds(s)
	})
	srcMap, _, err := sparse.ReadMap(t.Context(), src)
	require.NoError(t, err)
	before := runtime.NumGoroutine()
	const n = 8
	for range n {
		f, c := rawSession(t, addr, testToken)
		require.NoError(t, f.send(wire.Open, 0, openBody(opPull, 0, 4096, "img")))
		_, _, err := f.expect(wire.Opened)
		require.NoError(t, err)
		_, _, err = f.expect(wire.SrcInfo)
		require.NoError(t, err)
		_, err = readMap(f, srcMap.Size())
		require.NoError(t, err)
		require.NoError(t, f.writeFrame(wire.DstInfo, 0, dstInfoBody(uint64(srcMap.Size()), 0)))
		sendMapRaw(t, f, srcMap)
		require.NoError(t, f.send(wire.DoneAck, 0, make([]byte, 24)))
		time.AfterFunc(500*time.Millisecond, func() { c.Close() })
	}
	evs := waitSessions(t, ends, n, 30*time.Second)
	for _, ev := range evs {
		require.ErrorIs(t, ev.Err, ErrProtocol, "the early DONEACK is refused")
	}
	require.Eventually(t, func() bool { return srv.activeSessions() == 0 }, 10*time.Second, 10*time.Millisecond)
	// Goroutines of the dead sessions are gone (a few of the runtime's and
	// the test's may come and go).
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+4 }, 10*time.Second, 10*time.Millisecond,
		"goroutines: %d before, %d now", before, runtime.NumGoroutine())
}

// hostileServer accepts one connection at a time on loopback, authenticates
// with testToken and hands the framer to script.
func hostileServer(t *testing.T, script func(f *framer, c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(time.Minute))
				f := newFramer(c)
				f.noWindows = true // the scripts speak whole maps
				if _, err := serverHandshake(context.Background(), f, testToken, false, 0); err != nil {
					return
				}
				script(f, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestPushFacingEarlyDoneAck: a server that answers OPEN, DSTINFO with the
// source's own map (all compared) and DONEACK, then closes, must not hang
// the pushing client.
func TestPushFacingEarlyDoneAck(t *testing.T) {
	local := t.TempDir()
	src := writeLayout(t, local, "src", layout.Layout{Size: 64 << 20, Data: layout.Ranges(0, 64<<20)})
	srcMap, _, err := sparse.ReadMap(t.Context(), src)
	require.NoError(t, err)
	addr := hostileServer(t, func(f *framer, c net.Conn) {
		if _, _, err := f.expect(wire.Open); err != nil {
			return
		}
		_ = f.send(wire.Opened, 0)
		if _, _, err := f.expect(wire.SrcInfo); err != nil {
			return
		}
		if _, err := readMap(f, srcMap.Size()); err != nil {
			return
		}
		_ = f.writeFrame(wire.DstInfo, 0, dstInfoBody(uint64(srcMap.Size()), 0))
		_ = sendMap(f, srcMap)
		_ = f.send(wire.DoneAck, 0, make([]byte, 24))
		time.Sleep(500 * time.Millisecond)
	})
	o := clientOpts()
	o.IdleTimeout = 10 * time.Minute
	done := make(chan error, 1)
	go func() {
		_, err := PushFile(t.Context(), addr, src, "img", o)
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		require.False(t, errors.Is(err, context.DeadlineExceeded))
	case <-time.After(30 * time.Second):
		t.Fatal("the push hangs after the server's early DONEACK")
	}
}

// TestDripStalls is the 1 byte/s drip: an authenticated pusher sends
// valid ZERO frames for new 4 KiB ranges a byte at a time, each frame well
// within the per-frame read deadline. The session must end for lack of
// progress (64 KiB per idle timeout), not after hours.
func TestDripStalls(t *testing.T) {
	t.Parallel() // it waits on idle timeouts: beside the other waiting tests
	root := t.TempDir()
	var ends <-chan SessionEvent
	addr, srv := startServer(t, root, func(s *Server) {
		s.IdleTimeout = time.Second
		ends = sessionEnds(s)
	})
	f, c := rawSession(t, addr, testToken)
	require.NoError(t, c.SetDeadline(time.Time{}))
	require.NoError(t, f.send(wire.Open, 0, openBody(opPush, 0, 4096, "img")))
	_, _, err := f.expect(wire.Opened)
	require.NoError(t, err)
	const size = 64 << 20
	require.NoError(t, f.writeFrame(wire.SrcInfo, 0, srcInfoBody(size, 4096, "")))
	m, err := sparse.NewMap(size, sparse.Extent{Off: 0, Len: size})
	require.NoError(t, err)
	sendMapRaw(t, f, m)
	_, _, err = f.expect(wire.DstInfo)
	require.NoError(t, err)
	_, err = readMap(f, 0)
	require.NoError(t, err)
	go func() {
		// Frames are built by the session's framer (tags, sequence) into
		// a buffer, then dripped.
		var frame bytesConn
		f.w = newFrameBuf(&frame, 64)
		for off := uint64(0); off < size; off += 4096 {
			frame.b = frame.b[:0]
			b := binary.LittleEndian.AppendUint64(nil, off)
			b = binary.LittleEndian.AppendUint64(b, 4096)
			if f.send(wire.Zero, 0, b) != nil {
				return
			}
			for _, x := range frame.b {
				if _, err := c.Write([]byte{x}); err != nil {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	ev := waitSessions(t, ends, 1, 60*time.Second)[0]
	require.ErrorIs(t, ev.Err, ErrStalled)
	require.Eventually(t, func() bool { return srv.activeSessions() == 0 }, 10*time.Second, 10*time.Millisecond)
}

// bytesConn is a net.Conn that collects what is written.
type bytesConn struct {
	net.Conn
	b []byte
}

func (c *bytesConn) Write(b []byte) (int, error) { c.b = append(c.b, b...); return len(b), nil }

// TestPullFacingDrip: a hostile server drips valid ZERO frames a byte at
// a time to a pulling client; the client's own watchdog ends the pull
// with ErrStalled.
func TestPullFacingDrip(t *testing.T) {
	const size = 64 << 20
	m, err := sparse.NewMap(size, sparse.Extent{Off: 0, Len: size})
	require.NoError(t, err)
	addr := hostileServer(t, func(f *framer, c net.Conn) {
		if _, _, err := f.expect(wire.Open); err != nil {
			return
		}
		_ = f.send(wire.Opened, 0)
		_ = f.writeFrame(wire.SrcInfo, 0, srcInfoBody(size, 4096, ""))
		_ = sendMap(f, m)
		_ = f.flush()
		_, body, err := f.expect(wire.DstInfo)
		if err != nil || len(body) < 8 {
			return
		}
		if _, err := readMap(f, int64(binary.LittleEndian.Uint64(body))); err != nil {
			return
		}
		var frame bytesConn
		f.w = newFrameBuf(&frame, 64)
		for off := uint64(0); off < size; off += 4096 {
			frame.b = frame.b[:0]
			b := binary.LittleEndian.AppendUint64(nil, off)
			b = binary.LittleEndian.AppendUint64(b, 4096)
			if f.send(wire.Zero, 0, b) != nil {
				return
			}
			for _, x := range frame.b {
				if _, err := c.Write([]byte{x}); err != nil {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
	o := clientOpts()
	o.IdleTimeout = time.Second
	done := make(chan error, 1)
	go func() {
		_, err := Pull(t.Context(), addr, "img", filepath.Join(t.TempDir(), "copy"), o)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrStalled)
	case <-time.After(60 * time.Second):
		t.Fatal("the pull is still dripping after 60 s")
	}
}
