package tcpsync

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/sparsesync/sparsesync/internal/blockhash"
	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/internal/destplan"
	"github.com/sparsesync/sparsesync/internal/readahead"
	wtarget "github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// hashDepth is how many reads of its own compare blocks a receiver keeps
// in flight ahead of hashing them.
const hashDepth = 4

const (
	checkpointBytes    = 256 << 20
	checkpointInterval = 5 * time.Second
	// writebackEvery is how many bytes the data phase writes between two
	// starts of the target's writeback (internal/target's Writebacker):
	// the disk writes while the next bytes arrive, and a checkpoint's
	// fdatasync waits only for what is still in flight.
	writebackEvery = 8 << 20
)

// receiver applies a sender's stream to a target.
type receiver struct {
	f *framer
	// busyPut queues a busy PROGRESS frame while the session's send
	// queue runs (whileBusy); nil otherwise.
	busyPut func() error
	// worked is the data applied (DATA, ZERO) and compared so far; with
	// the bytes received, it is what wire.FlagWorked PROGRESS frames report.
	worked atomic.Int64

	t      *target
	p      syncParams
	plan   *plan
	dstMap sparse.Map
	st     Stats
	// Chunk states exist only for the chunk being received (cur, number
	// next) and the chunks awaiting a fix-up (pend, at most window): a
	// claimed size costs nothing until its data arrives.
	cur   *rstate
	pend  map[int]*rstate
	total digest // of the settled chunks
	first int    // first chunk of this session (resume)
	next  int    // next SEGEND expected
	water int    // chunks below are settled
	// sent is the end of the last first-pass DATA or ZERO range: they
	// come in increasing order, so each one is new progress.
	sent int64
	sc   sidecar
	// lastCP is the last checkpoint: its offset, the bytes worked
	// (worked) and the time then.
	lastCP struct {
		off, worked int64
		at          time.Time
	}
	dec     wire.Decoder
	scratch []byte
	batch   batchIn // the apply goroutine's
	blk     *blockhash.Hasher
	dk      *digestKey // the apply goroutine's
	// With wire.FeatWindows (receiver_window.go): the chunks of windows before
	// the current one (plan's chunk j is chunk base+j), the current
	// window [winLo, winHi), the target's walker and size at the start,
	// whether it may hide allocations, and the plans for hashAhead.
	base         int
	winLo, winHi int64
	dstWalk      *sparse.Walker
	dstSize      int64
	mayHide      bool
	jobs         chan planJob
	// srcData is the source's data blocks in the whole file (the bound of
	// the read-back's PROGRESS frames at the sender).
	srcData int64
	// wb starts the target's writeback as the data phase writes it
	// (writebackEvery); nil outside stream.
	wb *wtarget.Writebacker
}

// planJob is a plan whose compare chunks hashAhead hashes, from first on;
// its chunk j is the session's chunk base+j.
type planJob struct {
	p           *plan
	base, first int
}

// rstate is a chunk's progress on the receiving side.
type rstate struct {
	k        int
	c        chunk
	recv     digest // blocks received in this chunk
	sender   digest // the sender's digest, from SEGEND
	pending  *ownHashes
	replaced []bool
	settled  bool
}

// ownHashes are the receiver's hashes of a chunk's compare blocks.
type ownHashes struct {
	k      int
	seeded []uint64
	mix    []digest // per block (zero for all-zero blocks)
	err    error
}

// receiveTarget runs the receiver's side of one sync.
func receiveTarget(ctx context.Context, f *framer, t *target, p syncParams) (st Stats, err error) {
	r := &receiver{f: f, t: t, p: p, blk: blockhash.New(p.seed), dk: newDigestKey(p.seed)}
	defer r.dec.Close()
	err = r.run(ctx)
	if err != nil && !r.t.atomic() {
		// A target grown to the source's size before any data reached
		// past its old end gets its size back (only holes lay there), and
		// what settled is checkpointed, for a resume.
		if uerr := r.t.w.Ungrow(); uerr != nil {
			err = fmt.Errorf("%w (and could not restore the size of %s: %v)", err, r.t.display, uerr)
		}
		r.checkpoint(true)
	}
	return r.st, err
}

func (r *receiver) run(ctx context.Context) error {
	_, body, err := r.f.expectPast(wire.SrcInfo)
	if err != nil {
		return err
	}
	d := wire.Dec{B: body, T: wire.SrcInfo}
	size, bs, flags := d.U64(), d.U32(), d.U32()
	ident := string(d.Bytes(wire.MaxIdentity))
	var total uint64 // with wire.FeatWindows: the source's data blocks
	if r.f.windows {
		total = d.U64()
	}
	if err := d.End(); err != nil {
		return err
	}
	if size > wire.MaxSize {
		return fmt.Errorf("%w: source size %d over the limit %d", ErrProtocol, size, int64(wire.MaxSize))
	}
	if !validBlockSize(bs) {
		return fmt.Errorf("%w: block size %d (want a power of two in [%d, %d])", ErrProtocol, bs, wire.MinBlock, wire.MaxBlock)
	}
	r.p.bs = int64(bs)
	fullCompare := r.p.fullCompare || flags&1 != 0
	var srcMap sparse.Map
	if !r.f.windows {
		if srcMap, err = readMap(r.f, int64(size)); err != nil {
			return err
		}
	} else if total > size {
		return fmt.Errorf("%w: SRCINFO claims %d bytes of data in %d", ErrProtocol, total, size)
	}
	r.st.Size = int64(size)
	old, err := r.t.loadSidecar()
	if err != nil {
		return err
	}
	// Quick check: a verified sync of this very source version, untouched since.
	if !fullCompare && ident != "" && old != nil && old.State == stateComplete && old.Identity == ident &&
		old.Size == int64(size) && r.t.unchangedSince(old) {
		if !r.f.windows {
			total = uint64(srcMap.RoundOut(r.p.bs).Bytes())
		}
		return r.quick(int64(total))
	}
	// Resume: the same source version, into a target untouched since the
	// checkpoint (anything else, or a full compare, compares every chunk).
	var resume int64
	if !fullCompare && ident != "" && old != nil && old.State == stateIncomplete && old.Identity == ident &&
		old.Size == int64(size) && old.BlockSize == int64(bs) && old.Done > 0 && old.Done <= int64(size) &&
		!r.t.atomic() && r.t.unchangedSince(old) {
		resume = old.Done
	}
	if r.f.windows {
		return r.runWindowed(ctx, old, ident, resume, int64(total))
	}
	// The target's walk and an atomic target's seed copy can be long:
	// the sender, waiting for DSTINFO, hears that this side is busy.
	var hidden sparse.Map
	err = busyWhile(r.f, r.f.busy, r.f.busyFrame, func() error {
		var err error
		hidden, err = r.walkTarget(ctx)
		if err != nil {
			return err
		}
		return r.t.seedTemp(ctx, r.dstMap, r.f.m)
	})
	if err != nil {
		return err
	}
	r.plan, err = planFor(destplan.Input{Src: srcMap, Dst: r.dstMap, Hidden: hidden, Unit: r.p.bs})
	if err != nil {
		return err
	}
	r.first, err = r.plan.firstChunkAfter(resume)
	if err != nil {
		resume, r.first = 0, 0
	}
	if err := r.markIncomplete(old, ident, resume); err != nil {
		return err
	}
	r.st.DataBytes = r.plan.dataBytes
	r.srcData = r.plan.dataBytes

	b := binary.LittleEndian.AppendUint64(nil, uint64(r.dstMap.Size()))
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(resume))
	if err := r.f.writeFrame(wire.DstInfo, 0, b); err != nil {
		return err
	}
	if err := sendMap(r.f, r.dstMap); err != nil {
		return err
	}
	if err := r.f.flush(); err != nil {
		return err
	}
	if r.p.progress != nil {
		r.p.progress.Total.Store(r.plan.dataBytes)
	}

	// Shape the target: size, then holes where the source has none.
	if r.plan.resize {
		if err := r.t.w.SetSize(int64(size)); err != nil {
			return fmt.Errorf("truncating %s: %w", r.t.display, err)
		}
	}
	// The punch is exact to the source's holes, covers what growing from
	// an unaligned size allocates and the hidden allocation (destplan).
	if err := r.punch(ctx, r.plan.punch); err != nil {
		return err
	}
	r.pend = map[int]*rstate{}
	r.next, r.water = r.first, r.first
	r.jobs = make(chan planJob, 1)
	r.jobs <- planJob{p: r.plan, first: r.first}
	close(r.jobs)
	return r.stream(ctx)
}

// markIncomplete marks the target incomplete before a byte of it changes
// (the sidecar, with the resume offset).
func (r *receiver) markIncomplete(old *sidecar, ident string, resume int64) error {
	r.sc = sidecar{State: stateIncomplete, Identity: ident, Size: r.st.Size, BlockSize: r.p.bs, Done: resume}
	if !r.t.atomic() {
		if err := r.t.stamp(&r.sc); err != nil {
			return fmt.Errorf("%s: %w", r.t.display, err)
		}
		if err := r.t.saveSidecar(&r.sc); err != nil && (old == nil || old.State != stateIncomplete) {
			// Only fatal when the target is not already marked
			// incomplete: a retry on a full filesystem cannot write its
			// sidecar either, and must report the write that fails.
			return err
		}
	}
	r.lastCP.off, r.lastCP.worked, r.lastCP.at = resume, r.worked.Load(), time.Now()
	r.st.ResumedFrom = resume
	return nil
}

// quick answers a matching quick check: nothing to do.
func (r *receiver) quick(dataBytes int64) error {
	b := binary.LittleEndian.AppendUint64(nil, uint64(r.st.Size))
	b = append(b, 1)
	b = binary.LittleEndian.AppendUint64(b, 0)
	if err := r.f.send(wire.DstInfo, 0, b); err != nil {
		return err
	}
	if _, _, err := r.f.expect(wire.Done); err != nil {
		return err
	}
	r.st.QuickCheck, r.st.Verified = true, true
	r.t.unlock()
	r.st.DataBytes = dataBytes
	r.st.UnchangedBytes = r.st.DataBytes
	r.t.discard()
	return r.f.send(wire.DoneAck, 0, make([]byte, 24))
}

// stream handles the data phase: frames in, answers out through a writer
// goroutine, own hashes computed ahead by a hasher goroutine.
func (r *receiver) stream(ctx context.Context) error {
	g, gctx := newGroup(ctx)
	// A failure anywhere unblocks the connection (unblock), so no
	// goroutine of the group can stay stuck in the socket.
	stop := unblock(gctx, r.f.cc)
	defer stop()
	q := newSendq(r.f, window+4)
	r.wb = wtarget.NewWritebacker(r.t.w, writebackEvery)
	defer func() {
		r.wb.Stop()
		r.wb = nil
	}()
	r.busyPut = busyQueued(gctx, q)
	defer func() { r.busyPut = nil }()
	own := make(chan *ownHashes, 2)
	g.Go(func() error { return q.run(gctx) })
	// hashAhead gets its plans (and first chunks) as values: the
	// read-back of a failed check resets r.first on the apply goroutine.
	jobs := r.jobs
	g.Go(func() error { return r.hashAhead(gctx, jobs, own) })
	g.Go(func() error {
		// A receiver holding to a budget may apply or compare data
		// slower than the sender's idle timeout allows for an answer (its
		// socket buffers hold megabytes): it tells the sender it works.
		stopKA := r.keepalive(gctx, q, func() int64 { return r.worked.Load() + r.f.in.n.Load() }, wire.FlagWorked, r.f.worked && r.f.m.on())
		err := r.apply(gctx, q, own)
		stopKA()
		if err == nil {
			q.close()
		}
		return err
	})
	return g.Wait()
}

// hashAhead reads and hashes the target's compare blocks, chunk by chunk,
// before any DATA can touch them (DATA for compare blocks only follows our
// HASHES for their chunk).
func (r *receiver) hashAhead(ctx context.Context, jobs <-chan planJob, out chan<- *ownHashes) error {
	defer close(out)
	h := blockhash.New(r.p.seed)
	dk := newDigestKey(r.p.seed)
	// The read buffers, made when a plan first has blocks to compare (a
	// push to a new target never has): huge pages, so that their first
	// touches are few.
	var bufs chan []byte
	for {
		j, ok, err := recv(ctx, jobs)
		if err != nil || !ok {
			return err
		}
		if bufs == nil && j.p.nextCmpChunk(j.first) < j.p.nchunks {
			bufs = make(chan []byte, hashDepth)
			for _, b := range coldread.AlignedBuffers(hashDepth, wire.MaxDataPayload) {
				bufs <- b
			}
		}
		if err := r.hashPlan(ctx, j, h, dk, bufs, out); err != nil {
			return err
		}
	}
}

// hashPlan hashes the compare chunks of one plan (hashAhead). Neighbouring
// compare extents are read in one read (pieces: holes of up to sparse.ReadGap
// between them, up to wire.MaxDataPayload), hashDepth reads in flight in
// bufs (readahead), as the sender reads its source: a target
// of many small extents is then read in large requests, not in a cold
// request per extent.
func (r *receiver) hashPlan(ctx context.Context, j planJob, h *blockhash.Hasher, dk *digestKey, bufs chan []byte, out chan<- *ownHashes) error {
	p := j.p
	bs := r.p.bs
	for k := p.nextCmpChunk(j.first); k < p.nchunks; k = p.nextCmpChunk(k + 1) {
		cv := p.chunk(k)
		c := &cv
		o := &ownHashes{k: j.base + k, seeded: make([]uint64, 0, c.ncmp), mix: make([]digest, 0, c.ncmp)}
		m, err := sparse.FromExtents(p.size, c.cmp)
		if err != nil {
			return fmt.Errorf("hashing %s: %w", r.t.display, err)
		}
		pcs := sparse.Spans(m.RoundOut(bs).Extents(), wire.MaxDataPayload/bs*bs)
		err = readahead.Do(ctx, len(pcs), hashDepth, func(ctx context.Context, i int) ([]byte, error) {
			pc := pcs[i]
			n := pc.End - pc.Off
			var b []byte
			select {
			case b = <-bufs:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			if err := r.f.m.read(pc.Data()); err != nil {
				bufs <- b
				return nil, err
			}
			if got, err := r.t.w.OS().ReadAt(b[:n], pc.Off); int64(got) < n {
				bufs <- b
				if err == nil || errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return nil, fmt.Errorf("hashing %s: reading %d bytes at %d: %w", r.t.display, n, pc.Off, err)
			}
			return b, nil
		}, func(i int, buf []byte) error {
			defer func() { bufs <- buf }()
			pc := pcs[i]
			r.p.hooks.readTarget(pc.End - pc.Off)
			for _, e := range pc.Ext {
				for off := e.Off; off < e.End(); off += bs {
					b := buf[off-pc.Off : min(off+bs, e.End())-pc.Off]
					r.worked.Add(int64(len(b)))
					o.seeded = append(o.seeded, h.Sum(b))
					var d digest
					if !sparse.IsZero(b) {
						d.addBlock(dk, off, b)
					}
					o.mix = append(o.mix, d)
				}
			}
			return nil
		}, func(b []byte) { bufs <- b })
		if err != nil {
			return err
		}
		select {
		case out <- o:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// walkTarget sets r.dstMap to the target's map (empty without a target)
// and returns its hidden allocation: preallocated blocks the walk calls
// holes, punched where the source has holes. Local only: the peer plans
// with dstMap.
func (r *receiver) walkTarget(ctx context.Context) (sparse.Map, error) {
	if r.t.final == nil {
		r.dstMap, _ = sparse.NewMap(0)
		return sparse.Map{}, nil
	}
	w, err := sparse.NewWalker(r.t.final)
	if err != nil {
		return sparse.Map{}, err
	}
	if r.dstMap, err = w.Map(ctx); err != nil {
		return sparse.Map{}, err
	}
	return sparse.HiddenAllocation(ctx, r.t.final, r.dstMap, w.Info().Allocated)
}
