package tcpsync

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// Long phases that move no counted byte. Some of a session's work can
// outlast the idle timeout with nothing to count: the sender's walk of a
// source of tens of millions of extents before SRCINFO, the receiver's
// walk of its target before DSTINFO, and its fdatasync or fsync of a
// large target (a checkpoint, before the read-back, the commit). While
// such a phase runs, a side whose peer announced wire.FeatBusy sends a
// PROGRESS frame with wire.FlagBusy every keepalive interval; the peer takes
// each one as progress (its watchdog) and its arrival re-arms the peer's
// read deadline; the busy side's own watchdog counts the same. A phase that ends within the interval sends nothing.
//
// A peer that says it is busy keeps the session up for as long as it
// says so, as one that trickles data would: a hung fsync holds the
// session until its caller gives up (Ctrl-C, a context deadline). The
// server's session caps bound what that costs it.

// busyWhile runs fn; while fn runs, if on, put sends one PROGRESS frame
// with wire.FlagBusy every keepalive interval (a quarter of a shorter idle
// timeout). put must be safe to call while fn runs: the framer directly
// when fn writes nothing, else the session's send queue.
func busyWhile(f *framer, on bool, put func() error, fn func() error) error {
	if !on {
		return fn()
	}
	stop := f.everyKeepalive(func() error {
		if err := put(); err != nil {
			return err
		}
		f.progress(minProgress) // this side works too: its own watchdog
		return nil
	})
	err := fn()
	stop()
	return err
}

// everyKeepalive calls send every keepalive interval (keepaliveEvery, or
// a quarter of a shorter idle timeout) until send fails or stop is
// called; stop waits for the last call.
func (f *framer) everyKeepalive(send func() error) (stop func()) {
	every := keepaliveEvery
	if f.idle > 0 {
		every = min(every, max(f.idle/4, 10*time.Millisecond))
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-quit:
				return
			}
			if send() != nil {
				return
			}
		}
	})
	return func() {
		close(quit)
		wg.Wait()
	}
}

// busyFrame sends one PROGRESS frame with wire.FlagBusy on f (when nothing
// else writes to it).
func (f *framer) busyFrame() error {
	return f.send(wire.Progress, wire.FlagBusy, make([]byte, 8))
}

// busyQueued queues one PROGRESS frame with wire.FlagBusy on q.
func busyQueued(ctx context.Context, q *sendq) func() error {
	return func() error {
		a := q.frame(wire.Progress)
		a.flags = wire.FlagBusy
		a.u64(0)
		return q.put(ctx, a)
	}
}

// expectPast is expect for a frame the peer may precede with PROGRESS
// frames of wire.FlagBusy (wire.FeatBusy): each is progress, and is skipped.
func (f *framer) expectPast(t wire.Type) (uint8, []byte, error) {
	for {
		got, flags, body, err := f.readFrame()
		if err != nil {
			return 0, nil, err
		}
		if got == wire.Progress && flags == wire.FlagBusy && f.busy {
			if err := parseBusy(body); err != nil {
				return 0, nil, err
			}
			f.progress(minProgress)
			continue
		}
		if got == wire.Error {
			return 0, nil, decodeError(body)
		}
		if got != t {
			return 0, nil, fmt.Errorf("%w: got %s, want %s", ErrProtocol, got, t)
		}
		return flags, body, nil
	}
}

// parseBusy checks a busy PROGRESS frame's body: one u64, zero.
func parseBusy(body []byte) error {
	d := wire.Dec{B: body, T: wire.Progress}
	n := d.U64()
	if err := d.End(); err != nil {
		return err
	}
	if n != 0 {
		return fmt.Errorf("%w: busy PROGRESS with a count of %d", ErrProtocol, n)
	}
	return nil
}
