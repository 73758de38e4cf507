package tcpsync

import (
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
	"github.com/sparsesync/sparsesync/internal/wire"
)

// Connection admission. A connection is "pending" from accept until its
// OPEN is accepted (handshake, authentication and OPEN, all within
// HandshakeTimeout), then a "session". The two have separate budgets, so
// unauthenticated (or authenticated but silent) connections can never
// starve sessions:
//
//   - pending: at most MaxPreAuthPerHost per peer address (more are
//     refused) and MaxPreAuth in all. When full, a pending connection that
//     has waited greetGrace (1 s) for its peer at its current step
//     (silent: it sent nothing, or stopped mid-handshake) is closed to make
//     room, from the address with the most pending connections, oldest
//     first. A connection is never evicted before it had greetGrace to
//     speak: a fresh one whose goroutine has not read yet, or one whose
//     peer is answering, stays. With no silent connection to evict, a
//     newcomer whose peer has already sent bytes (a real client sends its
//     HELLO, or its TLS ClientHello, with the connection; it is waited
//     for speakWait, off the accept loop) is admitted beyond MaxPreAuth,
//     up to MaxConns; a silent newcomer is refused.
//     A flood of silent connections, from however many addresses, thus
//     fills only the places no speaking client needs;
//   - sessions: at most MaxSessionsPerHost per address and MaxSessions in
//     all; beyond, OPEN is answered "busy";
//   - MaxConnsPerHost and MaxConns bound both together.
//
// A refusal costs a pre-encoded 52-byte ERROR frame and a close (just a
// close under TLS, where plaintext would break the peer's TLS stack); a
// client retries both, and a hang-up before the greeting, with backoff.
// A pending connection's buffers are a few KiB until its peer is
// authenticated (framer.grow). Refusals, evictions and failed handshakes
// are counted and logged as one summary line per logInterval, never a
// line each.

// greetGrace is how long a pending connection may wait for its peer at
// one step (HELLO, AUTH, OPEN, a TLS handshake message) before it may be
// evicted for a newcomer: more than a round trip on any real network.
const greetGrace = time.Second

const logInterval = 10 * time.Second

type connState int

const (
	statePending connState = iota
	stateSession
	stateEvicted
)

// watchedConn is an accepted connection that knows since when its
// server has been waiting for the peer's bytes (for eviction).
type watchedConn struct {
	net.Conn
	waiting atomic.Int64 // unix nanoseconds a Read started blocking; 0 outside Read
}

func (c *watchedConn) Read(b []byte) (int, error) {
	c.waiting.Store(time.Now().UnixNano())
	n, err := c.Conn.Read(b)
	c.waiting.Store(0)
	return n, err
}

// CloseWrite half-closes a TCP connection (linger).
func (c *watchedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// silentFor reports whether the server has waited at least d for the
// peer in the current Read.
func (c *watchedConn) silentFor(now int64, d time.Duration) bool {
	w := c.waiting.Load()
	return w != 0 && now-w >= int64(d)
}

// speaks reports whether the peer of a just accepted connection sends
// bytes within wait (peeked, nothing consumed). A client sends its HELLO,
// or its TLS ClientHello, right after its connect returns, so its bytes
// follow the handshake's last ACK at once; a silent peer costs the accept
// loop wait, which slows a flood down.
func speaks(c net.Conn, wait time.Duration) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	var n int
	_ = rawfd.Do(sc, func(fd int) error {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		return rawfd.Retry(func() (err error) {
			n, err = unix.Poll(p, int(wait.Milliseconds()))
			return err
		})
	})
	return n > 0
}

// speakWait is how long a newcomer's first bytes are waited for when it
// would otherwise be refused, and maxProbes how many newcomers may be
// waited for at once (at most MaxConns-MaxPreAuth; more are refused at
// once): the wait happens off
// the accept loop, so a silent flood does not delay the accept of a
// client behind it.
const (
	speakWait = 5 * time.Millisecond
	maxProbes = 64
)

// probe takes a place to wait for a newcomer's first bytes, if one is free.
func (s *Server) probe() bool {
	select {
	case s.probes <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *Server) probeDone() { <-s.probes }

// tracked is one accepted connection.
type tracked struct {
	c        net.Conn
	w        *watchedConn // c, or what c wraps
	host     string
	state    connState
	elem     *list.Element // in Server.pending while pending
	authed   bool          // the peer proved the token (session goroutine only)
	opened   bool          // its OPEN was accepted: a session (idem)
	released bool          // counted out (s.mu)
}

// connStats counts what the summary line reports.
type connStats struct {
	refused, evicted, failed atomic.Int64
	last                     atomic.Int64 // unix nanoseconds of the last summary
}

func hostCounts(m map[string]int, host string, d int) {
	if m[host] += d; m[host] <= 0 {
		delete(m, host)
	}
}

// admit registers a new connection (w, from host), evicting a silent
// pending one if the pending budget is full; nil means refused, full
// that it was for want of room (not a per-address cap). With no silent
// one to evict, a newcomer that spoke (speaks) is admitted beyond
// MaxPreAuth, within MaxConns.
func (s *Server) admit(w *watchedConn, host string, spoke bool) (_ *tracked, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perHost[host] >= s.MaxConnsPerHost || s.preAuth[host] >= s.MaxPreAuthPerHost {
		return nil, false
	}
	for s.pending.Len() >= s.MaxPreAuth || s.pending.Len()+s.sessions >= s.MaxConns {
		if s.evictSilent() {
			continue
		}
		if spoke && s.pending.Len()+s.sessions < s.MaxConns {
			break // a speaking peer beyond MaxPreAuth, within MaxConns
		}
		return nil, true
	}
	tc := &tracked{c: w, w: w, host: host}
	tc.elem = s.pending.PushBack(tc)
	s.conns++
	hostCounts(s.perHost, host, 1)
	hostCounts(s.preAuth, host, 1)
	return tc, false
}

// evictSilent closes a pending connection that has waited greetGrace for
// its peer (s.mu held): of the address with the most pending connections,
// the oldest. A flood from a few addresses pushes out its own
// connections, and never a client that is speaking or has not yet had
// its chance to.
func (s *Server) evictSilent() bool {
	var e *list.Element
	most := 0
	now := time.Now().UnixNano()
	for x := s.pending.Front(); x != nil; x = x.Next() {
		tc := x.Value.(*tracked)
		if n := s.preAuth[tc.host]; n > most && tc.w.silentFor(now, s.greetGrace) {
			e, most = x, n
		}
	}
	if e == nil {
		return false
	}
	tc := e.Value.(*tracked)
	s.pending.Remove(e)
	hostCounts(s.preAuth, tc.host, -1)
	tc.state, tc.elem = stateEvicted, nil
	_ = tc.c.Close()
	s.stats.evicted.Add(1)
	return true
}

// promote turns a pending connection into a session at OPEN.
func (s *Server) promote(tc *tracked) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case tc.state != statePending:
		return fmt.Errorf("%w: connection closed to make room", ErrBusy)
	case s.sessions >= s.MaxSessions:
		return fmt.Errorf("%w: too many sessions", ErrBusy)
	case s.hostSessions[tc.host] >= s.MaxSessionsPerHost:
		return fmt.Errorf("%w: too many sessions from %s", ErrBusy, tc.host)
	}
	s.pending.Remove(tc.elem)
	hostCounts(s.preAuth, tc.host, -1)
	tc.state, tc.elem = stateSession, nil
	s.sessions++
	hostCounts(s.hostSessions, tc.host, 1)
	return nil
}

// release forgets a connection whose goroutine is done (or that only
// lingers); a second call does nothing.
func (s *Server) release(tc *tracked) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tc.released {
		return
	}
	tc.released = true
	switch tc.state {
	case statePending:
		s.pending.Remove(tc.elem)
		hostCounts(s.preAuth, tc.host, -1)
	case stateSession:
		s.sessions--
		hostCounts(s.hostSessions, tc.host, -1)
	}
	tc.state = stateEvicted
	s.conns--
	hostCounts(s.perHost, tc.host, -1)
}

// refusal is the ERROR frame sent to a refused plaintext connection,
// encoded once per server.
func refusal() []byte {
	msg := "tcpsync: server busy: too many connections"
	b := make([]byte, wire.HeaderLen, wire.HeaderLen+2+len(msg))
	b[0] = byte(wire.Error)
	binary.LittleEndian.PutUint32(b[4:], uint32(2+len(msg)))
	b = binary.LittleEndian.AppendUint16(b, wire.CodeBusy)
	return append(b, msg...)
}

// refuse sends the pre-encoded refusal (not under TLS) and closes c.
func (s *Server) refuse(c net.Conn) {
	if s.TLSConfig == nil {
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.Write(s.busy)
	}
	_ = c.Close()
	s.stats.refused.Add(1)
	s.summary(false)
}

// summary logs the counts since the last line, at most once per
// logInterval (or now when final).
func (s *Server) summary(final bool) {
	now := time.Now().UnixNano()
	last := s.stats.last.Load()
	if !final && now-last < int64(logInterval) || !s.stats.last.CompareAndSwap(last, now) {
		return
	}
	r, e, f := s.stats.refused.Swap(0), s.stats.evicted.Swap(0), s.stats.failed.Swap(0)
	if r+e+f == 0 {
		return
	}
	s.mu.Lock()
	pending, sessions := s.pending.Len(), s.sessions
	s.mu.Unlock()
	s.Logger.Warn("connections turned away", "refused", r, "evicted_unauthenticated", e, "failed_handshakes", f,
		"pending", pending, "sessions", sessions, "since", time.Duration(now-last).Round(time.Second))
}

// temporaryAccept reports whether an accept error is worth retrying:
// out of descriptors or buffers, or a connection aborted before accept.
func temporaryAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED, syscall.ENOBUFS, syscall.ENOMEM, syscall.EAGAIN, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// acceptBackoff waits after a temporary accept error, as net/http does:
// 5 ms doubling to 1 s. Out of descriptors, it first closes a silent
// pending connection, which is what frees one.
func (s *Server) acceptBackoff(ctx context.Context, err error, delay *time.Duration) {
	if *delay == 0 {
		*delay = 5 * time.Millisecond
	} else {
		*delay = min(2**delay, time.Second)
	}
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		s.mu.Lock()
		s.evictSilent()
		s.mu.Unlock()
	}
	s.stats.failed.Add(1)
	s.summary(false)
	s.Logger.Debug("accept failed, retrying", "err", err, "delay", *delay)
	t := time.NewTimer(*delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
