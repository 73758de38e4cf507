package qos

import (
	"context"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// A limited caller moves its bytes in pieces of a tenth of a second of the
// rate, within these bounds. The upper bound keeps the pieces of callers
// sharing one limiter of similar size: a token bucket shares its rate in
// proportion to the pieces asked for, so equal pieces are a fair share.
const (
	minPiece = 4 << 10
	maxPiece = 256 << 10
)

// Limiter bounds a flow of bytes to a rate. It is safe for concurrent use;
// the nil Limiter is unlimited.
type Limiter struct {
	parent *Limiter
	clock  clock
	bucket *rate.Limiter
	bps    atomic.Int64 // bytes per second; 0: unlimited
	waited atomic.Int64 // nanoseconds callers spent waiting on this limiter
	bytes  atomic.Int64 // bytes asked for through Wait
}

// NewLimiter returns a limiter of bytesPerSecond (0 or less: unlimited).
func NewLimiter(bytesPerSecond int64) *Limiter {
	return newLimiter(nil, realClock{}, bytesPerSecond)
}

// Child returns a limiter of its own rate inside l: a caller of the child
// waits for both, so the child never exceeds its rate nor l its own, and
// l's rate is shared by all its children. A nil l gives a plain limiter.
func (l *Limiter) Child(bytesPerSecond int64) *Limiter {
	if l == nil {
		return NewLimiter(bytesPerSecond)
	}
	return newLimiter(l, l.clock, bytesPerSecond)
}

func newLimiter(parent *Limiter, c clock, bps int64) *Limiter {
	l := &Limiter{parent: parent, clock: c, bucket: rate.NewLimiter(rate.Inf, 0)}
	l.SetRate(bps)
	return l
}

// SetRate changes the rate (0 or less: unlimited). Callers already waiting
// keep the piece they reserved; their next piece is at the new rate.
func (l *Limiter) SetRate(bytesPerSecond int64) {
	if l == nil {
		return
	}
	bytesPerSecond = max(bytesPerSecond, 0)
	now := l.clock.Now()
	if bytesPerSecond == 0 {
		l.bucket.SetLimitAt(now, rate.Inf)
	} else {
		l.bucket.SetLimitAt(now, rate.Limit(bytesPerSecond))
		l.bucket.SetBurstAt(now, int(burst(bytesPerSecond)))
	}
	l.bps.Store(bytesPerSecond)
}

// Rate is the current rate in bytes per second; 0 means unlimited.
func (l *Limiter) Rate() int64 {
	if l == nil {
		return 0
	}
	return l.bps.Load()
}

// Waited is the total time callers have spent waiting on this limiter
// (a caller waiting on a child and its parent counts on both).
func (l *Limiter) Waited() time.Duration {
	if l == nil {
		return 0
	}
	return time.Duration(l.waited.Load())
}

// Bytes is the total asked for through Wait on this limiter or its
// children, limited or not: what the callers moved in the direction this
// limiter bounds.
func (l *Limiter) Bytes() int64 {
	if l == nil {
		return 0
	}
	return l.bytes.Load()
}

// Piece is the most bytes a caller should move between two calls to Wait
// so that the rate holds over short windows: a tenth of a second of the
// slowest limit on the chain, from 4 KiB to 256 KiB. 0 means no limit
// applies.
func (l *Limiter) Piece() int64 {
	p := int64(0)
	for c := l; c != nil; c = c.parent {
		if bps := c.bps.Load(); bps > 0 && (p == 0 || piece(bps) < p) {
			p = piece(bps)
		}
	}
	return p
}

func piece(bps int64) int64 { return min(max(bps/10, minPiece), maxPiece) }

// burst is how much the bucket holds: a tenth of a second of the rate (at
// least a piece), so a caller that fell behind for a moment (a slow read,
// a full socket) catches up, while no one-second window gets more than
// 110% of the rate. With room for one piece only, a push at 200 MiB/s lost
// every such moment for good and kept 0.86 of its limit.
func burst(bps int64) int64 { return max(bps/10, piece(bps)) }

// Wait blocks until n bytes may move, or ctx is done. It takes the bytes in
// pieces (see Piece), so a large n is spread over time instead of being one
// burst. On a cancelled context the piece being waited for is given back.
func (l *Limiter) Wait(ctx context.Context, n int64) error {
	if l == nil {
		return ctx.Err()
	}
	for c := l; c != nil; c = c.parent {
		c.bytes.Add(max(n, 0))
	}
	for n > 0 {
		p := l.Piece()
		if p == 0 {
			return ctx.Err()
		}
		got, err := l.waitPiece(ctx, min(p, n))
		if err != nil {
			return err
		}
		n -= got
	}
	return nil
}

// waitPiece reserves up to p bytes on every limited limiter of the chain
// at the same instant, sleeps for the longest of their delays, and says how
// many bytes it admitted (fewer than p if a rate was lowered meanwhile).
func (l *Limiter) waitPiece(ctx context.Context, p int64) (int64, error) {
	var chain [4]*Limiter
	limited := chain[:0]
	for c := l; c != nil; c = c.parent {
		if c.bps.Load() > 0 {
			limited = append(limited, c)
			p = min(p, int64(c.bucket.Burst()))
		}
	}
	var held [4]*rate.Reservation
	rs := held[:0]
	now := l.clock.Now()
	delay := time.Duration(0)
	cancel := func() {
		for _, r := range rs {
			r.CancelAt(now)
		}
	}
	for _, c := range limited {
		r := c.bucket.ReserveN(now, int(p))
		if !r.OK() { // the burst shrank since it was read: ask again
			cancel()
			return 0, nil
		}
		rs = append(rs, r)
		delay = max(delay, r.DelayFrom(now))
	}
	if delay <= 0 {
		return p, ctx.Err()
	}
	for _, c := range limited {
		c.waited.Add(int64(delay))
	}
	if err := l.clock.Sleep(ctx, delay); err != nil {
		now = l.clock.Now()
		cancel()
		return 0, err
	}
	return p, nil
}
