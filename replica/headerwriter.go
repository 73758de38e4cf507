package replica

import (
	"fmt"
	"time"

	"github.com/sparsesync/sparsesync/internal/target"
)

// headerInterval is the least time between two count-only header writes.
const headerInterval = 10 * time.Millisecond

// kickHeader starts the header writer unless it runs.
func (r *Replica) kickHeader() {
	r.hwMu.Lock()
	defer r.hwMu.Unlock()
	if r.hwRunning {
		return
	}
	r.hwRunning = true
	r.hwWG.Add(1)
	go r.headerWriter()
}

// headerWriter records the durable count until the header holds it. A
// failed write latches the replica.
func (r *Replica) headerWriter() {
	defer r.hwWG.Done()
	for {
		r.hwMu.Lock()
		d := r.durable.Load()
		if d == r.headerCount() || r.latched.Load() != nil {
			r.hwRunning = false
			r.hwMu.Unlock()
			return
		}
		r.hwMu.Unlock()
		err := r.injected(target.OpSidecarWrite, HeaderFile)
		if err == nil {
			err = r.writeCount(d, false)
		}
		if err != nil {
			r.fail(fmt.Errorf("%s: %w", HeaderFile, err))
			continue // latched: the loop ends
		}
		time.Sleep(headerInterval)
	}
}

// headerCount is the count replica.hdr holds.
func (r *Replica) headerCount() uint64 {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return r.hf.cur.writeSeq
}

// writeCount durably records count (at most r.durable) in replica.hdr.
func (r *Replica) writeCount(count uint64, clean bool) error {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	h := r.hf.cur
	h.flushSeq++
	h.writeSeq, h.clean, h.bootID = count, clean, r.bootID
	h.head, h.rcSeq = r.head, r.rcSeq.Load()
	return r.hf.write(h)
}

// Epoch returns the membership epoch recorded in replica.hdr.
func (r *Replica) Epoch() uint64 {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return r.hf.cur.epoch
}

// SetEpoch durably records a new membership epoch (the engine bumps it on
// every survivor before acknowledging a write some replica failed).
func (r *Replica) SetEpoch(epoch uint64) error {
	if le := r.latched.Load(); le != nil {
		return le
	}
	r.hmu.Lock()
	defer r.hmu.Unlock()
	h := r.hf.cur
	h.epoch = epoch
	h.head, h.rcSeq = r.head, r.rcSeq.Load()
	if r.live != nil {
		h.writeSeq = max(h.writeSeq, r.durable.Load())
	}
	if err := r.hf.write(h); err != nil {
		return r.fail(err)
	}
	return nil
}
