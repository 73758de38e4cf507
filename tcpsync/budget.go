package tcpsync

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/sparsesync/sparsesync/qos"
)

// meter charges one session's I/O to its budget (qos.Budget: storage reads,
// storage writes, wire bytes) and keeps the idle-timeout machinery from
// mistaking a wait on the budget for a stalled peer: while any of the
// session's goroutines waits, its watchdog does not fire, and a wait on the
// wire budget in the middle of a frame pushes the frame's read deadline
// back by the time waited. The zero meter charges nothing.
//
// A peer that limits itself makes this side wait too, without waits of its
// own: a limited sender reads and sends in pieces of its budget
// (readPiece), so its frames arrive steadily; a limited receiver, whose
// answers may come long after this side's bytes sat in the socket
// buffers, reports its work in PROGRESS frames (wire.FlagWorked). What is left
// is the watchdog's floor of minProgress per idle timeout: a limit below
// 64 KiB per idle timeout (546 B/s at the default 2 minutes) is a stall.
type meter struct {
	b    qos.Budget
	ctx  context.Context
	conn net.Conn      // whose read deadline a wait pushes back
	idle time.Duration // the read deadline armed before each frame (0: none)
	wd   *watchdog

	mu      sync.Mutex
	waiting int       // goroutines waiting now
	since   time.Time // when waiting went from 0 to 1
	waited  time.Duration
}

// on reports whether the meter charges anything.
func (m *meter) on() bool {
	return m != nil && (m.b.Read != nil || m.b.Write != nil || m.b.Wire != nil)
}

// wait charges n bytes to l, waiting while l's rate asks for it.
func (m *meter) wait(l *qos.Limiter, n int64) error {
	if m == nil || l == nil || n <= 0 {
		return nil
	}
	if l.Piece() == 0 { // unlimited now: counted, never waits
		return l.Wait(m.ctx, n)
	}
	m.begin()
	defer m.end()
	return l.Wait(m.ctx, n)
}

func (m *meter) read(n int64) error  { return m.wait(m.budget().Read, n) }
func (m *meter) write(n int64) error { return m.wait(m.budget().Write, n) }

func (m *meter) budget() qos.Budget {
	if m == nil {
		return qos.Budget{}
	}
	return m.b
}

func (m *meter) begin() {
	m.mu.Lock()
	if m.waiting == 0 {
		m.since = time.Now()
	}
	m.waiting++
	m.mu.Unlock()
	m.wd.hold(1)
}

func (m *meter) end() {
	m.wd.hold(-1)
	m.mu.Lock()
	m.waiting--
	if m.waiting == 0 {
		m.waited += time.Since(m.since)
	}
	m.mu.Unlock()
}

// throttled is the wall time during which at least one of the session's
// goroutines waited on the budget.
func (m *meter) throttled() time.Duration {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.waited
	if m.waiting > 0 {
		d += time.Since(m.since)
	}
	return d
}

// wireRead charges n bytes that just arrived. A wait pushes the read
// deadline of the frame being read back by its length: the time is this
// side's, not the peer's.
func (m *meter) wireRead(n int) error {
	l := m.budget().Wire
	if l == nil || n <= 0 {
		return nil
	}
	start := time.Now()
	err := m.wait(l, int64(n))
	if d := time.Since(start); m.idle > 0 && l.Piece() > 0 && d > time.Millisecond {
		_ = m.conn.SetReadDeadline(time.Now().Add(m.idle))
	}
	return err
}

// writePiece is how many bytes to write to storage before the next charge.
func (m *meter) writePiece(n int64) int64 {
	if p := m.budget().Write.Piece(); p > 0 {
		return min(n, p)
	}
	return n
}

// wirePiece is how many bytes to write before the next charge: all of
// them when the wire is not limited, else a piece of the rate.
func (m *meter) wirePiece(n int) int {
	if p := m.budget().Wire.Piece(); p > 0 {
		return min(n, int(p))
	}
	return n
}
