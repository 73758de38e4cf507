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
)

// Connection admission. A connection is "pending" from accept until its
// OPEN is accepted (handshake, authentication and OPEN, all within
// HandshakeTimeout), then a "session". The two have separate budgets, so
// unauthenticated (or authenticated but silent) connections can never
// starve sessions:
//
//   - pending: at most MaxPreAuthPerHost per peer address (more are
//     refused) and MaxPreAuth in all; when full, the oldest pending
//     connection of the address with the most pending connections is
//     closed to make room (a flood pushes out its own oldest connections,
//     while a real client authenticates in a round trip);
//   - sessions: at most MaxSessionsPerHost per address and MaxSessions in
//     all; beyond, OPEN is answered "busy";
//   - MaxConnsPerHost and MaxConns bound both together.
//
// A refusal costs a pre-encoded 52-byte ERROR frame and a close (just a
// close under TLS, where plaintext would break the peer's TLS stack).
// Refusals, evictions and failed handshakes are counted and logged as one
// summary line per logInterval, never a line each.

const logInterval = 10 * time.Second

type connState int

const (
	statePending connState = iota
	stateSession
	stateEvicted
)

// tracked is one accepted connection.
type tracked struct {
	c        net.Conn
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

// admit registers a new connection, evicting the oldest pending one if
// the pending budget is full; nil means refused.
func (s *Server) admit(c net.Conn, host string) *tracked {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perHost[host] >= s.MaxConnsPerHost || s.preAuth[host] >= s.MaxPreAuthPerHost {
		return nil
	}
	for s.pending.Len() >= s.MaxPreAuth || s.pending.Len()+s.sessions >= s.MaxConns {
		if !s.evictOldest() {
			return nil
		}
	}
	tc := &tracked{c: c, host: host}
	tc.elem = s.pending.PushBack(tc)
	s.conns++
	hostCounts(s.perHost, host, 1)
	hostCounts(s.preAuth, host, 1)
	return tc
}

// evictOldest closes the oldest pending connection of the address with
// the most pending connections (s.mu held): a flood from a few addresses
// pushes out its own connections, not a lone client's handshake.
func (s *Server) evictOldest() bool {
	var e *list.Element
	most := 0
	for x := s.pending.Front(); x != nil; x = x.Next() {
		if n := s.preAuth[x.Value.(*tracked).host]; n > most {
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
	b := make([]byte, headerLen, headerLen+2+len(msg))
	b[0] = byte(fError)
	binary.LittleEndian.PutUint32(b[4:], uint32(2+len(msg)))
	b = binary.LittleEndian.AppendUint16(b, codeBusy)
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
// 5 ms doubling to 1 s. Out of descriptors, it first closes the oldest
// pending connection, which is what frees one.
func (s *Server) acceptBackoff(ctx context.Context, err error, delay *time.Duration) {
	if *delay == 0 {
		*delay = 5 * time.Millisecond
	} else {
		*delay = min(2**delay, time.Second)
	}
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		s.mu.Lock()
		s.evictOldest()
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
