package target

import "sync/atomic"

// Writebacker starts the asynchronous writeback of a File's dirty pages as
// its bytes accumulate, from one goroutine of its own, so that the disk
// writes while the caller receives or reads the next bytes instead of all
// of it waiting for the next fdatasync. The kernel's own flusher starts
// writeback only after the dirty expiry (30 s) or above the dirty ratio;
// a target of many small extents then costs, at every sync, the
// allocation and a separate I/O of each extent with nothing else going on.
// Starting it from one goroutine keeps the caller out of sync_file_range
// (which on ext4 and XFS allocates the blocks of every delayed write it
// starts) and never has two calls queue on the inode's writeback lock:
// kicks that come while one runs fold into the next.
//
// Wrote may be called from many goroutines at once (a copy's workers);
// Stop once, after the last Wrote. Writeback is only a head start: the caller
// still syncs, and that sync reports any error.
type Writebacker struct {
	every int64
	dirty atomic.Int64 // written since the last kick
	kick  chan struct{}
	done  chan struct{}
	// calls counts the writebacks started (tests).
	calls atomic.Int64
}

// NewWritebacker starts the goroutine that starts t's writeback once every
// `every` bytes Wrote reports; Stop ends it. every <= 0 never starts any.
func NewWritebacker(t *File, every int64) *Writebacker {
	w := &Writebacker{every: every, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for range w.kick {
			w.calls.Add(1)
			t.startWriteback()
		}
	}()
	return w
}

// Wrote notes n bytes written to the file's page cache; every `every`
// bytes it asks the goroutine to start their writeback (without waiting).
// A nil Writebacker does nothing.
func (w *Writebacker) Wrote(n int64) {
	if w == nil || w.every <= 0 || n <= 0 {
		return
	}
	if w.dirty.Add(n) < w.every {
		return
	}
	w.dirty.Store(0)
	select {
	case w.kick <- struct{}{}:
	default: // a kick is pending: it covers these bytes too
	}
}

// Stop ends the goroutine, after the writeback start in progress (if any)
// returns: no call reaches the file after Stop.
func (w *Writebacker) Stop() {
	close(w.kick)
	<-w.done
}

// Started reports how many writebacks were started so far.
func (w *Writebacker) Started() int64 { return w.calls.Load() }
