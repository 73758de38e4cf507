package tcpsync

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// runWindowed is the receiver's side with wire.FeatWindows, once SRCINFO is in
// and the sidecar read: DSTINFO without a map, the target shaped, then the
// stream, in which each WINDOW from the sender is answered with the
// target's own piece (onWindow). total is the source's data blocks, as
// SRCINFO says (progress only).
func (r *receiver) runWindowed(ctx context.Context, old *sidecar, ident string, resume, total int64) error {
	if resume%r.p.bs != 0 && resume != r.st.Size {
		resume = 0
	}
	r.srcData = total
	if err := r.f.mem.reserve(windowMemory, "the windows of the extent maps"); err != nil {
		return err
	}
	if r.t.final != nil {
		w, err := sparse.NewWalker(r.t.final)
		if err != nil {
			return err
		}
		r.dstWalk, r.dstSize = w, w.Size()
		// Preallocated blocks no walk shows (punched where the source
		// has holes, window by window): only looked for if the target's
		// allocation exceeds its data. A walk of the whole target: busy.
		err = busyWhile(r.f, r.f.busy, r.f.busyFrame, func() (err error) {
			_, r.mayHide, err = w.Tally(ctx)
			return err
		})
		if err != nil {
			return err
		}
	}
	empty, _ := sparse.NewMap(r.dstSize)
	if err := r.t.seedTemp(ctx, empty, r.f.m); err != nil { // the temporary file's size; windows seed their data
		return err
	}
	if err := r.markIncomplete(old, ident, resume); err != nil {
		return err
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(r.dstSize))
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(resume))
	if err := r.f.send(wire.DstInfo, 0, b); err != nil {
		return err
	}
	if r.p.progress != nil {
		r.p.progress.Total.Store(total)
	}
	if r.dstSize != r.st.Size {
		if err := r.t.w.SetSize(r.st.Size); err != nil {
			return fmt.Errorf("truncating %s: %w", r.t.display, err)
		}
	}
	r.pend = map[int]*rstate{}
	r.winLo, r.winHi = resume, resume
	r.jobs = make(chan planJob, 1)
	if r.winHi == r.st.Size {
		close(r.jobs) // nothing left to send
	}
	return r.stream(ctx)
}

// onWindow takes the sender's next window: only once every chunk of the
// previous one is settled, starting where it ended. It answers with the
// target's extents in the window (ending it sooner where they are too many
// for one frame), derives the window's plan as the sender does, seeds an
// atomic temporary file there, punches the destination's data (and hidden
// preallocations) over the source's holes there, and hands the plan to
// hashAhead.
func (r *receiver) onWindow(ctx context.Context, q *sendq, body []byte) error {
	switch {
	case !r.f.windows:
		return fmt.Errorf("%w: WINDOW from a peer that did not announce windows", ErrProtocol)
	case r.winHi >= r.st.Size:
		return fmt.Errorf("%w: WINDOW after the last one", ErrProtocol)
	case r.plan != nil && (r.next != r.base+r.plan.nchunks || len(r.pend) > 0):
		return fmt.Errorf("%w: WINDOW before the previous window's chunks were settled", ErrProtocol)
	}
	lo := r.winHi
	hi, src, err := wire.ParseWindow(body, lo, r.st.Size, r.p.bs)
	if err != nil {
		return err
	}
	dst, hi, err := r.ownWindow(ctx, lo, hi)
	if err != nil {
		return err
	}
	hidden, err := r.windowHidden(ctx, dst, lo, hi)
	if err != nil {
		return err
	}
	p, err := windowPlan(clipExtents(src, hi), dst, hidden, r.dstSize, lo, hi, r.p.bs)
	if err != nil {
		return err
	}
	// An atomic target's window seeded from the old one: a copy of the
	// window's data, which can be large.
	if err := r.whileBusy(func() error { return r.t.seedExtents(ctx, dst, r.f.m) }); err != nil {
		return err
	}
	if err := r.punch(ctx, p.punch); err != nil {
		return err
	}
	ans, err := wire.WindowFrame(lo, hi, dst)
	if err != nil {
		return err
	}
	a := q.frame(wire.Window)
	a.payload = ans
	if err := q.put(ctx, a); err != nil {
		return err
	}
	if r.dstMap, err = sparse.FromExtents(max(r.dstSize, hi), dst); err != nil {
		return err
	}
	if r.plan != nil {
		r.base += r.plan.nchunks
	}
	r.plan, r.winLo, r.winHi = p, lo, hi
	r.st.DataBytes += p.dataBytes
	select {
	case r.jobs <- planJob{p: p, base: r.base}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if hi == r.st.Size {
		close(r.jobs)
	}
	return nil
}

// ownWindow walks the target's extents in [lo, hi) (as they were when the
// session started: nothing at or after lo has been written yet) and
// returns them with the window's end: hi, or sooner where they are too
// many for one WINDOW frame.
func (r *receiver) ownWindow(ctx context.Context, lo, hi int64) ([]sparse.Extent, int64, error) {
	if r.dstWalk == nil || r.dstSize <= lo {
		return nil, hi, nil
	}
	end := min(hi, r.dstSize)
	ext, h, err := collectWindow(ctx, r.dstWalk.WalkFrom, lo, end, r.p.bs)
	if err != nil {
		return nil, 0, fmt.Errorf("walking %s: %w", r.t.display, err)
	}
	if h < end {
		hi = h
	}
	return fitWindow(ext, lo, hi, r.p.bs)
}

// windowHidden returns the target's hidden allocation in the window
// [lo, hi) (empty unless the target may hide preallocations): destplan
// punches it where the source has holes.
func (r *receiver) windowHidden(ctx context.Context, dst []sparse.Extent, lo, hi int64) (sparse.Map, error) {
	if !r.mayHide || r.dstSize <= lo {
		return sparse.Map{}, nil
	}
	data, err := sparse.FromExtents(min(hi, r.dstSize), dst)
	if err != nil {
		return sparse.Map{}, err
	}
	return sparse.HiddenAllocationIn(ctx, r.t.final, data, lo)
}

// punch punches m's extents in the target.
func (r *receiver) punch(ctx context.Context, m sparse.Map) error {
	for _, e := range m.Extents() {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if _, err := r.t.w.Zero(e.Off, e.Len); err != nil {
			return err
		}
		r.st.PunchedBytes += e.Len
	}
	return nil
}

// readBackWindows is the read-back's digest with wire.FeatWindows: the target's
// own data as stored (whole blocks), walked a window at a time. A block of
// it outside the source's data that is not all zeros changes the digest,
// as checkOutsideData finds it without windows.
func (r *receiver) readBackWindows(ctx context.Context, onRead func(int64) error) (digest, int64, error) {
	f := r.t.w.OS()
	w, err := sparse.NewWalker(f)
	if err != nil {
		return digest{}, 0, err
	}
	var got digest
	var read int64
	for lo := int64(0); lo < w.Size(); {
		ext, hi, err := collectWindow(ctx, w.WalkFrom, lo, w.Size(), r.p.bs)
		if err != nil {
			return got, read, err
		}
		m, err := sparse.NewMap(hi, ext...)
		if err != nil {
			return got, read, err
		}
		m = m.RoundOut(r.p.bs)
		d, err := readBackDigest(ctx, f, m, r.p.bs, r.p.seed, onRead)
		if err != nil {
			return got, read, err
		}
		got.add(d)
		read += m.Bytes()
		lo = hi
	}
	return got, read, nil
}
