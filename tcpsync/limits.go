package tcpsync

import (
	"fmt"
	"sync"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// Memory budgets. A session's memory is what it was given up front (its
// fixed buffers) plus, with windows (wire.FeatWindows), windowMemory once, or,
// with an older peer, what its peer's whole extent map costs, reserved as the
// map's bytes arrive (a claimed extent count is checked against the
// session's budget, never reserved). The peer's claims (a file size, a
// count it does not send) cost nothing. The server-wide budget is also
// shared out per peer address: one address holds at most a quarter of it
// (Server.MaxMemoryPerHost), so sessions from one host cannot lock out
// every other.
const (
	// sessionFixed is a session's fixed buffers: the framer (2 × 256 KiB
	// plus a frame of up to 1 MiB), the sender's 8 pooled 1 MiB buffers,
	// the receiver's scratch and its hashDepth 1 MiB hashing buffers. The
	// pool and the hashing buffers are each one allocation padded by up to
	// 2 MiB to start on a huge page (coldread.AlignedBuffers): address
	// space, touched only where the runtime zeroes reused memory.
	sessionFixed = 12 << 20
	// extentCost is what one extent of a received map may cost, all
	// copies included: its encoding (up to 20 bytes), the decoded map and
	// the plan's derived maps and prefix counts (16 bytes each).
	extentCost = 20 + 8*16
	// defaultSessionMemory lets a map of 2*wire.MaxExtents through (~310 MiB)
	// from a peer with wire.FeatWideMaps: the limit of a map's length is then
	// this budget (Server.MaxSessionMemory), not a count.
	defaultSessionMemory = sessionFixed + 2*wire.MaxExtents*extentCost + 1<<20
	// defaultServerMemory is the server-wide budget (1 GiB).
	defaultServerMemory = 1 << 30
)

// memPool is the server-wide budget, shared by every session, with a
// share per peer address.
type memPool struct {
	mu          sync.Mutex
	used, limit int64
	hostLimit   int64
	hostUsed    map[string]int64
}

// take reserves n bytes for host; "" when it fits, else what is full.
func (p *memPool) take(host string, n int64) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.used+n > p.limit:
		return "server memory budget exhausted"
	case p.hostLimit > 0 && p.hostUsed[host]+n > p.hostLimit:
		return fmt.Sprintf("%s holds its share of the server memory budget (%d MiB)", host, p.hostLimit>>20)
	}
	p.used += n
	if p.hostUsed == nil {
		p.hostUsed = map[string]int64{}
	}
	p.hostUsed[host] += n
	return ""
}

func (p *memPool) give(host string, n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used -= n
	if p.hostUsed[host] -= n; p.hostUsed[host] <= 0 {
		delete(p.hostUsed, host)
	}
}

// sessionMem is one session's budget, drawn from pool (if any) on behalf
// of the peer address host.
type sessionMem struct {
	pool        *memPool
	host        string
	used, limit int64
}

// fits refuses a claim (n bytes the peer announced, not yet sent) that
// could never fit the session's budget; nothing is reserved.
func (m *sessionMem) fits(n int64, what string) error {
	if m != nil && m.used+n > m.limit {
		return fmt.Errorf("%w: %s needs %d MiB, over the session's memory budget of %d MiB", ErrFrameTooLarge, what, n>>20, m.limit>>20)
	}
	return nil
}

// reserve takes n bytes for what, or fails: over the session's budget is
// the peer's fault (ErrFrameTooLarge), an exhausted pool or address share
// is the server's state (ErrBusy, retryable).
func (m *sessionMem) reserve(n int64, what string) error {
	if m == nil {
		return nil
	}
	if err := m.fits(n, what); err != nil {
		return err
	}
	if m.pool != nil {
		if full := m.pool.take(m.host, n); full != "" {
			return fmt.Errorf("%w: %s (%s needs %d MiB)", ErrBusy, full, what, n>>20)
		}
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
		m.pool.give(m.host, m.used)
	}
	m.used = 0
}
