package tcpsync

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrStalled means a session moved less than minProgress bytes of data in
// an idle timeout, whatever frames it sent: the peer is gone, stuck or
// dripping. Retryable.
var ErrStalled = errors.New("tcpsync: session stalled: no progress for the idle timeout")

// minProgress is the data a session must move per idle timeout (64 KiB:
// 546 bytes/s at the default 2 minutes; a drip of a byte a second is cut).
const minProgress = 64 << 10

// watchdog ends a session that makes too little progress. Progress is
// counted in bytes where
// the sync advances and a peer cannot fake it: a write to the socket that
// completes, a DATA or ZERO range applied (each covers new blocks: the
// receiver refuses ranges out of order), a chunk answered or settled
// (comparison work). Map frames are not progress: a peer trickling a
// 64 KiB EXTENTS frame per idle period to hold a map's reservation is cut. A frame that advances nothing (a repeated or out-of-order one is
// a protocol error anyway) does not rearm it, so a peer cannot keep a
// session, its file descriptor and its memory by sending a trickle.
//
// The zero value and a nil *watchdog do nothing.
type watchdog struct {
	idle  time.Duration
	moved atomic.Int64 // bytes of progress so far
	seen  int64        // moved at the start of the current period (timer only)
	fire  func()
	mu    sync.Mutex
	timer *time.Timer
	fired atomic.Bool
	held  atomic.Int32 // goroutines waiting on the session's budget
}

// startWatchdog calls fire (once, on a timer goroutine) when progress is not
// called for idle. Stop it with stop.
func startWatchdog(idle time.Duration, fire func()) *watchdog {
	w := &watchdog{idle: idle, fire: fire}
	w.mu.Lock()
	w.timer = time.AfterFunc(idle, w.check)
	w.mu.Unlock()
	return w
}

// check runs every idle period: enough progress since the last one, or the
// session ends.
func (w *watchdog) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer == nil { // stopped
		return
	}
	// A session waiting on its own budget is not stalled: the budget set
	// its pace.
	if m := w.moved.Load(); m-w.seen >= minProgress || w.held.Load() > 0 {
		w.seen = m
		w.timer.Reset(w.idle)
		return
	}
	if w.fired.CompareAndSwap(false, true) {
		go w.fire()
	}
}

// progress records that the session moved n bytes.
func (w *watchdog) progress(n int64) {
	if w != nil {
		w.moved.Add(n)
	}
}

// hold adds d to the goroutines waiting on the session's budget.
func (w *watchdog) hold(d int32) {
	if w != nil {
		w.held.Add(d)
	}
}

// stalled reports whether the watchdog ended the session.
func (w *watchdog) stalled() bool { return w != nil && w.fired.Load() }

func (w *watchdog) stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}
