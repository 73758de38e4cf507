package tcpsync

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/pierrec/lz4/v4"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

func (r *receiver) apply(ctx context.Context, q *sendq, own <-chan *ownHashes) error {
	for {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		t, flags, body, err := r.f.readFrame()
		if err != nil {
			return err
		}
		switch t {
		case wire.Data:
			err = r.onData(flags, body)
		case wire.Batch:
			err = r.onBatch(flags, body)
		case wire.Zero:
			err = r.onZero(body)
		case wire.SegEnd:
			err = r.onSegEnd(ctx, q, own, body)
		case wire.FixEnd:
			err = r.onFixEnd(body)
		case wire.Done:
			return r.onDone(ctx, q, body)
		case wire.Window:
			err = r.onWindow(ctx, q, body)
		case wire.Error:
			return decodeError(body)
		default:
			err = fmt.Errorf("%w: unexpected %s from the sender", ErrProtocol, t)
		}
		if err != nil {
			return err
		}
	}
}

// span validates a DATA or ZERO range: block-aligned, inside one unsettled
// chunk, and either clear of its compare blocks (first pass) or inside them
// (fix-up after our HASHES).
func (r *receiver) span(t wire.Type, off, n uint64) (int64, int64, *rstate, *chunk, error) {
	if r.plan == nil {
		return 0, 0, nil, nil, fmt.Errorf("%w: %s before any WINDOW", ErrProtocol, t)
	}
	o, l, err := wire.OffLen(t, off, n, r.plan.size)
	if err != nil {
		return 0, 0, nil, nil, err
	}
	bs := r.p.bs
	if o%bs != 0 || ((o+l)%bs != 0 && o+l != r.plan.size) {
		return 0, 0, nil, nil, fmt.Errorf("%w: %s range [%d,%d) not block-aligned", ErrProtocol, t, o, o+l)
	}
	k := r.plan.chunkAt(o)
	if k >= 0 {
		k += r.base
	}
	var st *rstate
	switch {
	case k < r.first || k < 0:
	case k == r.next && k < r.base+r.plan.nchunks:
		st = r.current()
	default:
		st = r.pend[k]
	}
	if st == nil || o+l > st.c.end {
		return 0, 0, nil, nil, fmt.Errorf("%w: %s range [%d,%d) outside the chunks being sent", ErrProtocol, t, o, o+l)
	}
	c := &st.c
	i := sort.Search(len(c.cmp), func(i int) bool { return c.cmp[i].End() > o })
	inCmp := i < len(c.cmp) && c.cmp[i].Off < o+l
	if st.pending == nil && inCmp {
		return 0, 0, nil, nil, fmt.Errorf("%w: %s at %d for a block not yet compared", ErrProtocol, t, o)
	}
	if st.pending == nil {
		if o < r.sent {
			return 0, 0, nil, nil, fmt.Errorf("%w: %s range [%d,%d) before the previous one", ErrProtocol, t, o, o+l)
		}
		r.sent = o + l
	}
	if st.pending != nil {
		if !inCmp || c.cmp[i].Off > o || c.cmp[i].End() < o+l {
			return 0, 0, nil, nil, fmt.Errorf("%w: fix-up %s at %d outside the differing blocks", ErrProtocol, t, o)
		}
		// Mark the replaced compare blocks.
		idx := 0
		for _, e := range c.cmp[:i] {
			idx += int(blocksIn(e.Len, bs))
		}
		idx += int((o - c.cmp[i].Off) / bs)
		for p := o; p < o+l; p += bs {
			if st.replaced[idx] {
				return 0, 0, nil, nil, fmt.Errorf("%w: block at %d sent twice", ErrProtocol, p)
			}
			st.replaced[idx] = true
			idx++
		}
	}
	return o, l, st, c, nil
}

func (r *receiver) onData(flags uint8, body []byte) error {
	d := wire.Dec{B: body, T: wire.Data}
	off, rawLen := d.U64(), d.U32()
	if d.Err != nil {
		return d.Err
	}
	if rawLen == 0 || rawLen > wire.MaxDataPayload {
		return fmt.Errorf("%w: DATA of %d bytes (limit %d)", ErrProtocol, rawLen, wire.MaxDataPayload)
	}
	o, l, st, _, err := r.span(wire.Data, off, uint64(rawLen))
	if err != nil {
		return err
	}
	if r.scratch == nil && flags&wire.FlagCodecMask != 0 {
		r.scratch = make([]byte, max(wire.MaxDataPayload, lz4.CompressBlockBound(wire.MaxDataPayload)))
	}
	raw, err := r.dec.Decompress(flags, d.B, int(l), r.scratch)
	if err != nil {
		return err
	}
	return r.applyData(raw, o, st)
}

// applyData writes raw, the source's bytes at o (a checked range of chunk
// st), and counts it.
func (r *receiver) applyData(raw []byte, o int64, st *rstate) error {
	l := int64(len(raw))
	if err := r.writeData(raw, o, st.pending == nil); err != nil {
		return err
	}
	for p := int64(0); p < l; p += r.p.bs {
		b := raw[p:min(p+r.p.bs, l)]
		if !sparse.IsZero(b) {
			st.recv.addBlock(r.dk, o+p, b)
		}
	}
	r.st.CopiedBytes += l
	r.f.progress(l)
	if r.p.progress != nil {
		r.p.progress.Done.Add(l)
	}
	return nil
}

// writeData writes the parts of raw (the source's bytes at off) that lie in
// the source's data; the parts in its holes are zeros the target already
// reads as a hole, so a block larger than the source's holes keeps them.
// On the first pass (ahead), whose frames come in file order, a part of a
// small source extent is allocated first where that places it better
// (AllocateAhead: ext4); fix-ups come later, out of that order, into
// compare blocks, where the target holds data, and allocate nothing.
func (r *receiver) writeData(raw []byte, off int64, ahead bool) error {
	end := off + int64(len(raw))
	ext := r.plan.src.Extents()
	i := sort.Search(len(ext), func(i int) bool { return ext[i].End() > off })
	for ; i < len(ext) && ext[i].Off < end; i++ {
		a, b := max(ext[i].Off, off), min(ext[i].End(), end)
		if ahead {
			r.t.w.AllocateAhead(a, b-a, ext[i].Len)
		}
		// In pieces of the write budget, if it is limited: a steady
		// pace, and work to report while it lasts.
		for a < b {
			n := min(b-a, r.f.m.writePiece(b-a))
			if err := r.f.m.write(n); err != nil {
				return err
			}
			if _, err := r.t.w.WriteAt(raw[a-off:a-off+n], a); err != nil {
				return fmt.Errorf("writing %s at %d: %w", r.t.display, a, err)
			}
			r.worked.Add(n)
			r.wb.Wrote(n)
			a += n
		}
	}
	return nil
}

func (r *receiver) onZero(body []byte) error {
	d := wire.Dec{B: body, T: wire.Zero}
	off, n := d.U64(), d.U64()
	if err := d.End(); err != nil {
		return err
	}
	o, l, _, _, err := r.span(wire.Zero, off, n)
	if err != nil {
		return err
	}
	// Only what the target may hold needs punching (destplan's Held:
	// its data, and what growing it allocated); holes already read as
	// zeros.
	ext := r.plan.held.Extents()
	i := sort.Search(len(ext), func(i int) bool { return ext[i].End() > o })
	if i < len(ext) && ext[i].Off < o+l {
		if _, err := r.t.w.Zero(o, l); err != nil {
			return err
		}
		r.st.PunchedBytes += l
	}
	r.st.ZeroBytes += l
	r.worked.Add(l)
	r.f.progress(l)
	if r.p.progress != nil {
		r.p.progress.Done.Add(l)
	}
	return nil
}

func (r *receiver) onSegEnd(ctx context.Context, q *sendq, own <-chan *ownHashes, body []byte) error {
	d := wire.Dec{B: body, T: wire.SegEnd}
	k, hasCmp, cmpSum := d.U32(), d.U8(), d.U64()
	sd := digest{d.U64(), d.U64()}
	if err := d.End(); err != nil {
		return err
	}
	if r.plan == nil || int(k) != r.next || int(k) >= r.base+r.plan.nchunks {
		return fmt.Errorf("%w: SEGEND for chunk %d, expected %d", ErrProtocol, k, r.next)
	}
	st := r.current()
	r.cur = nil
	r.next++
	c := &st.c
	st.sender = sd
	if (c.ncmp > 0) != (hasCmp != 0) {
		return fmt.Errorf("%w: SEGEND %d disagrees on compare blocks", ErrProtocol, k)
	}
	if c.ncmp == 0 {
		return r.settle(st)
	}
	var o *ownHashes
	select {
	case o = <-own:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if o == nil || o.k != int(k) || len(o.seeded) != c.ncmp {
		return fmt.Errorf("internal: own hashes out of step at chunk %d", k)
	}
	hb := appendHashes(make([]byte, 0, 8*len(o.seeded)), o.seeded)
	if r.blk.Sum(hb) == cmpSum {
		for i, m := range o.mix {
			st.recv.add(m)
			_ = i
		}
		r.st.UnchangedBytes += cmpBytes(c)
		if r.p.progress != nil {
			r.p.progress.Done.Add(cmpBytes(c))
		}
		a := q.frame(wire.Result)
		a.u32(k)
		if err := q.put(ctx, a); err != nil {
			return err
		}
		return r.settle(st)
	}
	if len(r.pend) >= window {
		return fmt.Errorf("%w: more than %d chunks awaiting a fix-up", ErrProtocol, window)
	}
	r.pend[int(k)] = st
	st.pending = o
	st.replaced = make([]bool, c.ncmp)
	a := q.frame(wire.Hashes)
	a.u32(k)
	a.u32(uint32(len(o.seeded)))
	a.payload = hb
	return q.put(ctx, a)
}

func cmpBytes(c *chunk) int64 {
	var n int64
	for _, e := range c.cmp {
		n += e.Len
	}
	return n
}

func (r *receiver) onFixEnd(body []byte) error {
	d := wire.Dec{B: body, T: wire.FixEnd}
	k := d.U32()
	if err := d.End(); err != nil {
		return err
	}
	st := r.pend[int(k)]
	if st == nil || st.pending == nil {
		return fmt.Errorf("%w: FIXEND for chunk %d, which awaits no fix-up", ErrProtocol, k)
	}
	delete(r.pend, int(k))
	c := &st.c
	idx := 0
	for _, e := range c.cmp {
		for p := e.Off; p < e.End(); p += r.p.bs {
			if !st.replaced[idx] {
				st.recv.add(st.pending.mix[idx])
				r.st.UnchangedBytes += min(r.p.bs, e.End()-p)
				if r.p.progress != nil {
					r.p.progress.Done.Add(min(r.p.bs, e.End()-p))
				}
			}
			idx++
		}
	}
	st.pending, st.replaced = nil, nil
	return r.settle(st)
}

// current returns the state of chunk next, the one being received.
func (r *receiver) current() *rstate {
	if r.cur == nil || r.cur.k != r.next {
		r.cur = &rstate{k: r.next, c: r.plan.chunk(r.next - r.base)}
	}
	return r.cur
}

// settle verifies a chunk's digest and advances the durable watermark.
func (r *receiver) settle(st *rstate) error {
	if st.recv != st.sender {
		return fmt.Errorf("%w: %s: bytes [%d,%d) differ from the source's", ErrVerify, r.t.display, st.c.start, st.c.end)
	}
	st.settled = true
	r.total.add(st.recv)
	r.f.progress(cmpBytes(&st.c))
	r.water = r.next
	for k := range r.pend {
		r.water = min(r.water, k)
	}
	r.checkpoint(false)
	return nil
}

// checkpoint makes settled chunks durable and records them in the sidecar,
// with the target's identity after the sync, every checkpointBytes of
// data worked (applied or compared: what a resume would redo) or
// checkpointInterval (or now, when forced: the session ends, and the
// identity must be re-stamped after its last writes so a retry can trust
// it). Only settled chunks (whose digest check passed) are ever covered.
// The bytes are counted in data, not in file offsets: the chunks of a
// sparse target span far more offsets than data, and a checkpoint per
// 256 MiB of offsets cost a sparse 8 GiB push a fdatasync and a sidecar
// fsync every few megabytes.
func (r *receiver) checkpoint(force bool) {
	if r.t.atomic() {
		return
	}
	off := r.sc.Done
	switch {
	case r.water > r.first && r.water > r.base:
		off = r.plan.chunk(r.water - 1 - r.base).end
	case r.water > r.first:
		off = r.winLo // every window before this one is settled
	}
	cpBytes, cpEvery := int64(checkpointBytes), checkpointInterval
	if r.p.cpBytes > 0 {
		cpBytes = r.p.cpBytes
	}
	if r.p.cpEvery > 0 {
		cpEvery = r.p.cpEvery
	}
	worked := r.worked.Load()
	if off <= 0 || (!force && (off <= r.lastCP.off || worked-r.lastCP.worked < cpBytes && time.Since(r.lastCP.at) < cpEvery)) {
		return
	}
	if r.whileBusy(r.t.sync) != nil {
		return
	}
	if r.p.hooks != nil && r.p.hooks.beforeCheckpoint != nil {
		r.p.hooks.beforeCheckpoint(r.t.w.OS(), off)
	}
	r.sc.Done = off
	if r.t.stamp(&r.sc) != nil {
		return
	}
	if r.t.saveSidecar(&r.sc) == nil {
		r.lastCP.off, r.lastCP.worked, r.lastCP.at = off, worked, time.Now()
	}
}

func (r *receiver) onDone(ctx context.Context, q *sendq, body []byte) error {
	d := wire.Dec{B: body, T: wire.Done}
	size := d.U64()
	sd := digest{d.U64(), d.U64()}
	if err := d.End(); err != nil {
		return err
	}
	end := r.base
	if r.plan != nil {
		end += r.plan.nchunks
	}
	if int64(size) != r.st.Size || r.water != end || r.next != end || (r.f.windows && r.winHi != r.st.Size) {
		return fmt.Errorf("%w: %s: DONE with %d of %d chunks settled (windows up to %d)", ErrVerify, r.t.display, r.water, end, r.winHi)
	}
	if r.p.readBack {
		// sd covers the whole file; the stored bytes are checked against it.
		if err := r.readBack(ctx, q, sd); err != nil {
			return err
		}
	} else {
		r.p.hooks.finalCheck(r.t.w.OS())
		if r.total != sd {
			return fmt.Errorf("%w: %s: whole-file digest differs", ErrVerify, r.t.display)
		}
	}
	if err := r.whileBusy(r.t.commit); err != nil {
		return err
	}
	r.sc.State, r.sc.Done = stateComplete, r.st.Size
	if err := r.t.stamp(&r.sc); err == nil {
		_ = r.t.saveSidecar(&r.sc)
	}
	r.st.Verified = true
	r.t.unlock()
	a := q.frame(wire.DoneAck)
	a.u64(uint64(r.st.PunchedBytes))
	a.u64(uint64(r.st.CopiedBytes))
	a.u64(uint64(r.st.UnchangedBytes))
	return q.put(ctx, a)
}

// whileBusy runs fn (a sync or the commit), telling a peer that takes
// them that this side is busy while it runs longer than a keepalive
// interval (busy.go). Only while the session's send queue runs.
func (r *receiver) whileBusy(fn func() error) error {
	return busyWhile(r.f, r.f.busy && r.busyPut != nil, r.busyPut, fn)
}
