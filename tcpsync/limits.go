package tcpsync

import (
	"fmt"
	"sync"
)

// Memory budgets. A session's memory is what it was given up front (its
// fixed buffers) plus what its peer's extent map costs, reserved from the
// map's extent count before a byte of the map is buffered or decoded. The
// peer's claims (a file size, a count it does not send) cost nothing.
const (
	// sessionFixed is a session's fixed buffers: the framer (2 × 256 KiB
	// plus a frame of up to 1 MiB), the sender's 8 pooled 1 MiB buffers,
	// the receiver's scratch and hashing buffers.
	sessionFixed = 12 << 20
	// extentCost is what one extent of a received map may cost, all
	// copies included: its encoding (up to 20 bytes), the decoded map and
	// the plan's derived maps and prefix counts (16 bytes each).
	extentCost = 20 + 8*16
	// defaultSessionMemory lets a map of maxExtents through (~150 MiB).
	defaultSessionMemory = sessionFixed + maxExtents*extentCost + 1<<20
	// defaultServerMemory is the server-wide budget (1 GiB).
	defaultServerMemory = 1 << 30
)

// memPool is the server-wide budget, shared by every session.
type memPool struct {
	mu          sync.Mutex
	used, limit int64
}

func (p *memPool) take(n int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used+n > p.limit {
		return false
	}
	p.used += n
	return true
}

func (p *memPool) give(n int64) {
	p.mu.Lock()
	p.used -= n
	p.mu.Unlock()
}

// sessionMem is one session's budget, drawn from pool (if any).
type sessionMem struct {
	pool        *memPool
	used, limit int64
}

// reserve takes n bytes for what, or fails: over the session's budget is
// the peer's fault (ErrFrameTooLarge), an exhausted pool is the server's
// state (ErrBusy, retryable).
func (m *sessionMem) reserve(n int64, what string) error {
	if m == nil {
		return nil
	}
	if m.used+n > m.limit {
		return fmt.Errorf("%w: %s needs %d MiB, over the session's memory budget of %d MiB", ErrFrameTooLarge, what, n>>20, m.limit>>20)
	}
	if m.pool != nil && !m.pool.take(n) {
		return fmt.Errorf("%w: server memory budget exhausted (%s needs %d MiB)", ErrBusy, what, n>>20)
	}
	m.used += n
	return nil
}

// release gives everything back.
func (m *sessionMem) release() {
	if m == nil {
		return
	}
	if m.pool != nil {
		m.pool.give(m.used)
	}
	m.used = 0
}
