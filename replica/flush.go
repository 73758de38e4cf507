package replica

import (
	"fmt"

	"github.com/sparsesync/sparsesync/internal/target"
)

// count records one completed write or unmap.
func (r *Replica) count() error {
	if r.mode == CounterOff {
		return nil
	}
	if err := r.injected(target.OpSidecarWrite, RevisionCounterFile); err != nil {
		return fmt.Errorf("revision counter: %w", err)
	}
	if r.mode == CounterOn {
		r.live.n.Add(1)
		return nil
	}
	r.pwMu.Lock()
	defer r.pwMu.Unlock()
	n := r.live.n.Load() + 1
	formatRevisionCounter(r.pwBuf, int64(n))
	if _, err := r.rc.WriteAt(r.pwBuf, 0); err != nil {
		return fmt.Errorf("revision counter: %w", err)
	}
	r.live.n.Store(n)
	r.live.rc.Store(n)
	r.rcSeq.Store(n)
	return nil
}

// Revision returns the number of completed writes and unmaps (0 when the
// counter is off).
func (r *Replica) Revision() int64 {
	if r.live == nil {
		return 0
	}
	return int64(r.live.n.Load())
}

// Flush makes every write completed before the call durable: one fdatasync
// of the head, with the counter on or off. With the counter on, the header
// writer then records the count that sync covered in replica.hdr, behind
// the flush (see sync). Concurrent flushes share one sync (group commit): a
// caller waits for the first sync that starts after it arrived, and the one
// caller that finds no sync running leads it.
func (r *Replica) Flush() error {
	if le := r.latched.Load(); le != nil {
		return le
	}
	r.gate.RLock()
	defer r.gate.RUnlock()
	if r.closed {
		return fmt.Errorf("%s: %w", r.dir, ErrClosed)
	}
	r.fmu.Lock()
	target := r.fstarted + 1
	for r.fdone < target {
		if r.fsyncing {
			r.fcond.Wait()
			continue
		}
		r.fsyncing = true
		r.fstarted++
		seq := r.fstarted
		r.fmu.Unlock()
		err := r.sync(false)
		r.fmu.Lock()
		if err != nil {
			r.fail(err)
		}
		r.fsyncing = false
		r.fdone = seq
		r.fcond.Broadcast()
	}
	r.fmu.Unlock()
	return r.Err()
}

// sync persists data and a count (clean: the final sync of Close).
//
// A flush is one fdatasync of the head, as with the counter off. The count
// it made durable is recorded in replica.hdr afterwards by the header
// writer, a goroutine that runs while the header trails and writes at most
// once per headerInterval, so a flush never waits for a second I/O. The
// header only ever records a count whose data a completed sync made
// durable (design note 8 (c): never ahead of the data after a power loss);
// it trails the live count by the flushes of the last interval, which
// after a reboot costs at most a needless rebuild of a healthy replica,
// never a wrong pick: every replica of the highest epoch holds every write
// acknowledged before the last acknowledged flush. Close has no writes in
// flight and records the exact count after its data sync.
func (r *Replica) sync(clean bool) error {
	var s uint64
	if r.live != nil {
		s = r.live.n.Load()
	}
	if err := r.injected(target.OpFdatasync, r.chain[0]); err != nil {
		return err
	}
	if err := r.writeRevisionCounter(s); err != nil {
		return err
	}
	if err := fdatasync(r.layers[0]); err != nil {
		return err
	}
	r.durable.Store(s)
	if !clean {
		if r.live != nil {
			r.kickHeader()
		}
		return nil
	}
	r.hwWG.Wait()
	// Close makes revision.counter durable before the clean header
	// that repeats its count (leftoverReason relies on that order).
	if r.rc != nil {
		if err := fdatasync(r.rc); err != nil {
			return fmt.Errorf("revision counter: %w", err)
		}
	}
	return r.writeCount(s, true)
}

// writeRevisionCounter brings revision.counter to s, the count a sync is
// about to make durable, before that sync: Longhorn reads only this file,
// so a directory it adopts after a kill of our writer claims every write
// of the last completed flush (the page cache keeps the write; one
// pwrite, no sync of its own). The live page then records that
// revision.counter holds s: a higher count there is another writer's.
// With the counter per write the file is current already.
func (r *Replica) writeRevisionCounter(s uint64) error {
	if r.rc == nil || r.mode == CounterPerWrite {
		return nil
	}
	r.pwMu.Lock()
	defer r.pwMu.Unlock()
	if r.rcSeq.Load() == s {
		return nil
	}
	formatRevisionCounter(r.pwBuf, int64(s))
	if _, err := r.rc.WriteAt(r.pwBuf, 0); err != nil {
		return fmt.Errorf("revision counter: %w", err)
	}
	r.live.rc.Store(s)
	r.rcSeq.Store(s)
	return nil
}
