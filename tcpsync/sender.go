package tcpsync

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pierrec/lz4/v4"

	"github.com/sparsesync/sparsesync/internal/blockhash"
	"github.com/sparsesync/sparsesync/sparse"
)

const (
	// window is how many chunks with compare blocks may await the
	// receiver's answer (16 MiB of data each at 4 KiB blocks).
	window   = 8
	nBuffers = 8
	// autoWindow is how much data CompressAuto sends between decisions.
	autoWindow = 4 << 20
	// autoMaxRate is the send rate (bytes/s) above which CompressAuto never
	// compresses: zstd level 1 would then cost more time than it saves.
	autoMaxRate = 250e6
)

// syncParams are the per-session settings both roles share.
type syncParams struct {
	seed        uint64
	bs          int64
	compress    Compression
	fullCompare bool
	logger      *slog.Logger
	progress    *Progress
	// Receiver checkpoints: every cpBytes of settled data or cpEvery
	// (defaults checkpointBytes, checkpointInterval).
	cpBytes int64
	cpEvery time.Duration
	// readBack: the receiver reads the target back (ReadBack); the
	// sender's DONE digest then covers the whole file.
	readBack bool
	hooks    *testHooks
}

// sender streams a Source to a receiver over an authenticated framer.
type sender struct {
	f    *framer
	src  Source
	p    syncParams
	plan *plan
	q    *sendq
	pool *bufPool
	// Pending chunks: their seeded hashes until the receiver answers.
	mu      sync.Mutex
	hashes  map[uint32]inflight
	slots   chan struct{}
	st      Stats
	copied  atomic.Int64
	zeroed  atomic.Int64
	encoder encoder // the producer's
	fixEnc  encoder // the fixer's
	sample  []byte  // scratch for CompressAuto's compressibility probe
	// doneSent is set once DONE is queued: only then may DONEACK come.
	doneSent atomic.Bool
	// readBackSeen is what the receiver's PROGRESS frames reported read
	// back so far (the answer reader's).
	readBackSeen int64
	// workedSeen is what its flagWorked PROGRESS frames reported.
	workedSeen int64
}

// inflight is a chunk awaiting the receiver's answer.
type inflight struct {
	c      chunk
	hashes []uint64
}

type doneAck struct {
	punched, copied, unchanged uint64
}

// sendSource runs the sender's side of one sync.
func sendSource(ctx context.Context, f *framer, src Source, p syncParams) (Stats, error) {
	s := &sender{f: f, src: src, p: p, hashes: map[uint32]inflight{}}
	return s.run(ctx)
}

func (s *sender) run(ctx context.Context) (Stats, error) {
	if fs, ok := s.src.(*FileSource); ok {
		// The version this sync sends; changed() compares after the last read.
		if err := fs.refresh(ctx); err != nil {
			return s.st, err
		}
	}
	size := s.src.Size()
	if size < 0 || size > maxSize {
		return s.st, fmt.Errorf("tcpsync: source size %d out of range", size)
	}
	srcMap, err := s.src.Extents(ctx)
	if err != nil {
		return s.st, err
	}
	if srcMap.Size() != size {
		return s.st, fmt.Errorf("%w: extent map of size %d for a source of %d", ErrSourceChanged, srcMap.Size(), size)
	}
	var ident string
	if id, ok := s.src.(Identifier); ok {
		ident = id.Identity()
	}
	if len(ident) > maxIdentity {
		ident = ident[:maxIdentity]
	}
	var flags uint32
	if s.p.fullCompare {
		flags |= 1
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(size))
	b = binary.LittleEndian.AppendUint32(b, uint32(s.p.bs))
	b = binary.LittleEndian.AppendUint32(b, flags)
	b = appendBytes(b, []byte(ident))
	if err := s.f.writeFrame(fSrcInfo, 0, b); err != nil {
		return s.st, err
	}
	if err := sendMap(s.f, srcMap); err != nil {
		return s.st, err
	}
	if err := s.f.flush(); err != nil {
		return s.st, err
	}
	s.st.Size = size
	if s.p.progress != nil {
		s.p.progress.Total.Store(srcMap.RoundOut(s.p.bs).Bytes())
	}

	_, body, err := s.f.expect(fDstInfo)
	if err != nil {
		return s.st, err
	}
	d := dec{b: body, t: fDstInfo}
	dstSize, quick, resume := d.u64(), d.u8(), d.u64()
	if err := d.end(); err != nil {
		return s.st, err
	}
	if quick != 0 {
		s.st.QuickCheck = true
		s.st.DataBytes = srcMap.RoundOut(s.p.bs).Bytes()
		s.st.UnchangedBytes = s.st.DataBytes
		_, err := s.finish(ctx, digest{})
		return s.st, err
	}
	if dstSize > maxSize || resume > uint64(size) {
		return s.st, fmt.Errorf("%w: DSTINFO size %d / resume %d out of range", ErrProtocol, dstSize, resume)
	}
	dstMap, err := readMap(s.f, int64(dstSize))
	if err != nil {
		return s.st, err
	}
	s.plan, err = newPlan(srcMap, dstMap, s.p.bs)
	if err != nil {
		return s.st, err
	}
	first, err := s.plan.firstChunkAfter(int64(resume))
	if err != nil {
		return s.st, err
	}
	s.st.ResumedFrom = int64(resume)
	s.st.DataBytes = s.plan.dataBytes
	return s.stream(ctx, first)
}

// stream sends chunks from first on, with the answers handled concurrently.
func (s *sender) stream(ctx context.Context, first int) (Stats, error) {
	g, gctx := newGroup(ctx)
	// A failure anywhere unblocks the connection (unblock), so no
	// goroutine of the group can stay stuck in the socket.
	stop := unblock(gctx, s.f.c)
	defer stop()
	s.q = newSendq(s.f, 256)
	s.pool = newBufPool(nBuffers, maxDataPayload)
	s.slots = make(chan struct{}, window)
	fixes := make(chan fixJob, window+1)
	acks := make(chan doneAck, 1)

	g.Go(func() error { return s.q.run(gctx) })
	g.Go(func() error { return s.readAnswers(gctx, fixes, acks) })
	fixDone := make(chan struct{})
	g.Go(func() error {
		defer close(fixDone)
		return s.fixer(gctx, fixes)
	})
	var total digest
	var ack doneAck
	g.Go(func() error {
		var pre digest
		if s.p.readBack && first > 0 {
			var err error
			if pre, err = s.prefixDigest(gctx, first); err != nil {
				return err
			}
		}
		var err error
		total, err = s.produce(gctx, first)
		if err != nil {
			return err
		}
		total.add(pre)
		// Wait until every chunk is answered (all window slots free).
		for range window {
			select {
			case s.slots <- struct{}{}:
			case <-gctx.Done():
				return context.Cause(gctx)
			}
		}
		s.doneSent.Store(true)
		o := s.q.frame(fDone)
		o.u64(uint64(s.plan.size))
		o.u64(total.a)
		o.u64(total.b)
		if err := s.q.put(gctx, o); err != nil {
			return err
		}
		select {
		case ack = <-acks:
		case <-gctx.Done():
			return context.Cause(gctx)
		}
		close(fixes)
		<-fixDone
		s.q.close()
		return nil
	})
	err := g.Wait()
	s.encoder.close()
	s.fixEnc.close()
	if err != nil {
		return s.st, err
	}
	s.st.CopiedBytes = s.copied.Load()
	s.st.ZeroBytes = s.zeroed.Load()
	s.st.PunchedBytes = int64(ack.punched)
	s.st.UnchangedBytes = int64(ack.unchanged)
	s.st.Verified, s.st.ReadBack = true, s.p.readBack
	return s.st, nil
}

// finish sends DONE and waits for the receiver's verdict (quick check path).
func (s *sender) finish(ctx context.Context, total digest) (doneAck, error) {
	b := binary.LittleEndian.AppendUint64(nil, uint64(s.st.Size))
	b = binary.LittleEndian.AppendUint64(b, total.a)
	b = binary.LittleEndian.AppendUint64(b, total.b)
	if err := s.f.send(fDone, 0, b); err != nil {
		return doneAck{}, err
	}
	_, body, err := s.f.expect(fDoneAck)
	if err != nil {
		return doneAck{}, err
	}
	a, err := parseDoneAck(body)
	if err == nil {
		s.st.Verified = true
	}
	return a, err
}

func parseDoneAck(body []byte) (doneAck, error) {
	d := dec{b: body, t: fDoneAck}
	a := doneAck{d.u64(), d.u64(), d.u64()}
	return a, d.end()
}

type fixJob struct {
	k      uint32
	theirs []uint64
}

// readAnswers reads the receiver's frames. It never blocks on the writer:
// at most window answers can be outstanding and fixes has room for them.
func (s *sender) readAnswers(ctx context.Context, fixes chan<- fixJob, acks chan<- doneAck) error {
	for {
		t, flags, body, err := s.f.readFrame()
		if err != nil {
			return err
		}
		switch t {
		case fResult:
			d := dec{b: body, t: t}
			k := d.u32()
			if err := d.end(); err != nil {
				return err
			}
			in, err := s.takeHashes(k)
			if err != nil {
				return err
			}
			s.unchanged(&in.c)
			s.f.progress(int64(in.c.ncmp) * s.p.bs)
			<-s.slots
		case fHashes:
			d := dec{b: body, t: t}
			k, n := d.u32(), d.u32()
			if d.err == nil && uint64(n)*8 != uint64(len(d.b)) {
				return fmt.Errorf("%w: HASHES announces %d hashes in %d bytes", ErrProtocol, n, len(d.b))
			}
			theirs := make([]uint64, n)
			for i := range theirs {
				theirs[i] = d.u64()
			}
			if err := d.end(); err != nil {
				return err
			}
			select {
			case fixes <- fixJob{k, theirs}:
			default:
				return fmt.Errorf("%w: more HASHES than chunks in flight", ErrProtocol)
			}
		case fDoneAck:
			// A DONEACK before our DONE would leave the producer waiting
			// for answers nobody reads: the session ends here instead.
			if !s.doneSent.Load() {
				return fmt.Errorf("%w: DONEACK before DONE", ErrProtocol)
			}
			a, err := parseDoneAck(body)
			if err != nil {
				return err
			}
			acks <- a
			return nil
		case fProgress:
			if err := s.onProgress(flags, body); err != nil {
				return err
			}
		case fError:
			return decodeError(body)
		default:
			return fmt.Errorf("%w: unexpected %s from the receiver", ErrProtocol, t)
		}
	}
}

// onProgress takes a PROGRESS frame of the receiver's read-back: after
// DONE only, from a peer that announced them, counting up and never past
// the source's data blocks. What it adds is progress for the watchdog
// (and its arrival rearms the read deadline).
//
// With flagWorked, from a peer that announced them, at any time: the
// bytes the receiver received, applied or compared, counting up and never
// past what this side sent plus twice the source's data blocks (a
// compared block that differs is applied too). It is progress as well: a receiver held to a slow budget answers
// late, and says meanwhile that it works.
func (s *sender) onProgress(flags uint8, body []byte) error {
	d := dec{b: body, t: fProgress}
	n := d.u64()
	if err := d.end(); err != nil {
		return err
	}
	if flags == flagWorked {
		if !s.f.worked {
			return fmt.Errorf("%w: PROGRESS of work from a peer that did not announce it", ErrProtocol)
		}
		if most := 2*uint64(s.plan.blocks.Bytes()) + uint64(s.f.out.n.Load()); n < uint64(s.workedSeen) || n > most {
			return fmt.Errorf("%w: PROGRESS of %d bytes worked (was %d, at most %d)", ErrProtocol, n, s.workedSeen, most)
		}
		s.f.progress(int64(n) - s.workedSeen)
		s.workedSeen = int64(n)
		return nil
	}
	switch {
	case flags != 0:
		return fmt.Errorf("%w: PROGRESS with flags %#x", ErrProtocol, flags)
	case !s.f.keepalive:
		return fmt.Errorf("%w: PROGRESS from a peer that did not announce it", ErrProtocol)
	case !s.doneSent.Load():
		return fmt.Errorf("%w: PROGRESS before DONE", ErrProtocol)
	case n < uint64(s.readBackSeen) || n > uint64(s.plan.blocks.Bytes()):
		return fmt.Errorf("%w: PROGRESS of %d bytes read back (was %d, data %d)", ErrProtocol, n, s.readBackSeen, s.plan.blocks.Bytes())
	}
	s.f.progress(int64(n) - s.readBackSeen)
	s.readBackSeen = int64(n)
	return nil
}

func (s *sender) unchanged(c *chunk) {
	if s.p.progress != nil {
		var n int64
		for _, e := range c.cmp {
			n += e.Len
		}
		s.p.progress.Done.Add(n)
	}
}

// takeHashes removes and returns a chunk in flight.
func (s *sender) takeHashes(k uint32) (inflight, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hashes[k]
	if !ok {
		return inflight{}, fmt.Errorf("%w: answer for chunk %d, which is not in flight", ErrProtocol, k)
	}
	delete(s.hashes, k)
	return h, nil
}

// produce reads every chunk from first on, sends data the receiver lacks
// and zero markers, and queues SEGEND with the compare and digest sums.
func (s *sender) produce(ctx context.Context, first int) (digest, error) {
	var total digest
	hasher := blockhash.New(s.p.seed)
	sumHasher := blockhash.New(s.p.seed)
	dk := newDigestKey(s.p.seed)
	bs := s.p.bs
	var hb []byte
	compress := s.p.compress
	var autoOn bool
	autoMark, autoBlocked := time.Now(), s.q.blocked.Load()
	var sinceCheck int64
	for k := first; k < s.plan.nchunks; k++ {
		cv := s.plan.chunk(k)
		c := &cv
		var cdig digest
		var mine []uint64
		if c.ncmp > 0 {
			mine = make([]uint64, 0, c.ncmp)
		}
		ci := 0
		for _, pc := range pieces(c.ext, s.readPiece()) {
			if err := ctx.Err(); err != nil {
				return total, context.Cause(ctx)
			}
			off, n := pc.start, pc.end-pc.start
			waitStart := time.Now()
			pb, err := s.pool.get(ctx)
			if err != nil {
				return total, err
			}
			// Waiting for a buffer means the writer (the network) is behind.
			s.q.blocked.Add(int64(time.Since(waitStart)))
			buf := pb.b[:n]
			if err := s.f.m.read(n); err != nil {
				pb.unref()
				return total, err
			}
			if err := readFull(s.src, buf, off); err != nil {
				pb.unref()
				return total, err
			}
			codec := compress
			if compress == CompressAuto {
				codec = CompressNone
				if autoOn {
					codec = CompressZstd
				}
			}
			// Classify blocks into runs: data to send, zeros, compare.
			runStart, runKind := int64(0), 0 // 0 none, 1 data, 2 zero
			flushRun := func(end int64) error {
				if runKind == 0 || end == runStart {
					return nil
				}
				var err error
				if runKind == 1 {
					err = s.sendData(ctx, &s.encoder, pb, buf[runStart:end], off+runStart, codec)
				} else {
					err = s.sendZero(ctx, off+runStart, end-runStart)
				}
				runKind = 0
				return err
			}
			for _, se := range pc.ext {
				lo, hi := se.Off-off, se.End()-off
				for p := lo; p < hi; p += bs {
					blk := buf[p:min(p+bs, hi)]
					at := off + p
					zero := sparse.IsZero(blk)
					if !zero {
						cdig.addBlock(dk, at, blk)
					}
					for ci < len(c.cmp) && c.cmp[ci].End() <= at {
						ci++
					}
					kind := 1
					if zero {
						kind = 2
					}
					if ci < len(c.cmp) && c.cmp[ci].Off <= at {
						mine = append(mine, hasher.Sum(blk))
						kind = 0
					}
					if kind != runKind {
						if err := flushRun(p); err != nil {
							pb.unref()
							return total, err
						}
						runStart, runKind = p, kind
					}
				}
				if err := flushRun(hi); err != nil {
					pb.unref()
					return total, err
				}
			}
			if compress == CompressAuto {
				if sinceCheck += n; sinceCheck >= autoWindow {
					now, bl := time.Now(), s.q.blocked.Load()
					autoOn = autoDecide(autoOn, sinceCheck, now.Sub(autoMark), time.Duration(bl-autoBlocked)) && s.compressible(buf)
					autoMark, autoBlocked, sinceCheck = now, bl, 0
				}
			}
			pb.unref()
		}
		if len(mine) != c.ncmp {
			return total, fmt.Errorf("tcpsync: internal: chunk %d hashed %d of %d compare blocks", k, len(mine), c.ncmp)
		}
		// Take a window slot for a chunk that awaits an answer.
		if c.ncmp > 0 {
			select {
			case s.slots <- struct{}{}:
			case <-ctx.Done():
				return total, context.Cause(ctx)
			}
			s.mu.Lock()
			s.hashes[uint32(k)] = inflight{c: cv, hashes: mine}
			s.mu.Unlock()
		}
		o := s.q.frame(fSegEnd)
		o.u32(uint32(k))
		var cmpSum uint64
		if c.ncmp > 0 {
			hb = appendHashes(hb[:0], mine)
			cmpSum = sumHasher.Sum(hb)
			o.u8(1)
		} else {
			o.u8(0)
		}
		o.u64(cmpSum)
		o.u64(cdig.a)
		o.u64(cdig.b)
		if err := s.q.put(ctx, o); err != nil {
			return total, err
		}
		total.add(cdig)
	}
	if fs, ok := s.src.(*FileSource); ok {
		if err := fs.changed(); err != nil {
			return total, err
		}
	}
	return total, nil
}

// piece is one read: a span of at most maxDataPayload bytes covering
// source-data extents separated by small holes.
type piece struct {
	start, end int64
	ext        []sparse.Extent
}

// maxReadGap is the largest hole read through to join two extents in one
// read (holes read as zeros without I/O; they are never sent).
const maxReadGap = 64 << 10

// autoDecide is CompressAuto's choice for the next window, from the last
// one: sent bytes in elapsed time, of which blocked was spent waiting for
// the network. Compress while we mostly wait for the network (over half
// the time to switch on, over a tenth to stay on) and the send rate is
// below what zstd-1 compresses; whether the data shrinks is the caller's.
func autoDecide(on bool, sent int64, elapsed, blocked time.Duration) bool {
	if elapsed <= 0 {
		return false // an infinite rate
	}
	frac := float64(blocked) / float64(elapsed)
	rate := float64(sent) / elapsed.Seconds()
	return rate < autoMaxRate && ((on && frac > 0.1) || frac > 0.5)
}

// pieces cuts a chunk's data extents into reads: large extents into
// pieces of most bytes (at most maxDataPayload), small neighbours merged
// into one read.
func pieces(ext []sparse.Extent, most int64) []piece {
	var out []piece
	for _, e := range ext {
		for off := e.Off; off < e.End(); {
			n := min(e.End()-off, most)
			sub := sparse.Extent{Off: off, Len: n}
			if k := len(out) - 1; k >= 0 && off-out[k].end <= maxReadGap && off+n-out[k].start <= most {
				out[k].ext = append(out[k].ext, sub)
				out[k].end = off + n
			} else {
				out = append(out, piece{start: off, end: off + n, ext: []sparse.Extent{sub}})
			}
			off += n
		}
	}
	return out
}

// compressible samples b: does zstd-1 shrink it below 90%?
func (s *sender) compressible(b []byte) bool {
	b = b[:min(len(b), 128<<10)]
	if s.sample == nil {
		s.sample = make([]byte, 0, len(b)+len(b)/2+1024)
	}
	out, fl := s.encoder.compress(CompressZstd, b, s.sample[:0:cap(s.sample)])
	return fl != 0 && len(out) < len(b)*9/10
}

func appendHashes(b []byte, h []uint64) []byte {
	for _, v := range h {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: short read of %d bytes at %d (got %d): the source shrank", ErrSourceChanged, len(b), off, n)
	}
	return fmt.Errorf("tcpsync: reading the source at %d: %w", off, err)
}

// sendData queues a DATA frame pointing into pb (compressed into a copy if
// that pays).
func (s *sender) sendData(ctx context.Context, enc *encoder, pb *pbuf, raw []byte, off int64, codec Compression) error {
	o := s.q.frame(fData)
	o.u64(uint64(off))
	o.u32(uint32(len(raw)))
	s.copied.Add(int64(len(raw)))
	if s.p.progress != nil {
		s.p.progress.Done.Add(int64(len(raw)))
	}
	if codec == CompressLZ4 || codec == CompressZstd {
		cb, err := s.pool.get(ctx)
		if err != nil {
			return err
		}
		if need := lz4.CompressBlockBound(len(raw)); cap(cb.b) < need {
			cb.b = make([]byte, need)
		}
		out, fl := enc.compress(codec, raw, cb.b[:0:cap(cb.b)])
		if fl != 0 {
			o.flags = fl
			o.payload = out
			o.buf = cb
			return s.q.put(ctx, o)
		}
		cb.unref()
	}
	pb.ref()
	o.payload = raw
	o.buf = pb
	return s.q.put(ctx, o)
}

func (s *sender) sendZero(ctx context.Context, off, n int64) error {
	s.zeroed.Add(n)
	if s.p.progress != nil {
		s.p.progress.Done.Add(n)
	}
	o := s.q.frame(fZero)
	o.u64(uint64(off))
	o.u64(uint64(n))
	return s.q.put(ctx, o)
}

// fixer answers HASHES: it resends the blocks whose hashes differ, then
// FIXEND, and frees the chunk's window slot.
func (s *sender) fixer(ctx context.Context, fixes <-chan fixJob) error {
	hasher := blockhash.New(s.p.seed)
	for {
		var job fixJob
		var ok bool
		select {
		case job, ok = <-fixes:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if !ok {
			return nil
		}
		in, err := s.takeHashes(job.k)
		if err != nil {
			return err
		}
		mine := in.hashes
		if len(job.theirs) != len(mine) {
			return fmt.Errorf("%w: HASHES for chunk %d has %d hashes, want %d", ErrProtocol, job.k, len(job.theirs), len(mine))
		}
		c := &in.c
		bs := s.p.bs
		i := 0
		var runOff, runLen int64
		flush := func() error {
			if runLen == 0 {
				return nil
			}
			err := s.resend(ctx, hasher, runOff, runLen)
			runLen = 0
			return err
		}
		for _, e := range c.cmp {
			for off := e.Off; off < e.End(); off += bs {
				if mine[i] != job.theirs[i] {
					if runLen > 0 && runOff+runLen == off && runLen+bs <= s.readPiece() {
						runLen += min(bs, e.End()-off)
					} else {
						if err := flush(); err != nil {
							return err
						}
						runOff, runLen = off, min(bs, e.End()-off)
					}
				} else if s.p.progress != nil {
					s.p.progress.Done.Add(min(bs, e.End()-off))
				}
				i++
			}
		}
		if err := flush(); err != nil {
			return err
		}
		o := s.q.frame(fFixEnd)
		o.u32(job.k)
		if err := s.q.put(ctx, o); err != nil {
			return err
		}
		<-s.slots
	}
}

// resend re-reads a run of differing compare blocks and sends it as data
// and zero markers.
func (s *sender) resend(ctx context.Context, _ *blockhash.Hasher, off, n int64) error {
	pb, err := s.pool.get(ctx)
	if err != nil {
		return err
	}
	defer pb.unref()
	buf := pb.b[:n]
	if err := s.f.m.read(n); err != nil {
		return err
	}
	if err := readFull(s.src, buf, off); err != nil {
		return err
	}
	bs := s.p.bs
	start, kind := int64(0), 0
	emit := func(end int64) error {
		if kind == 0 || end == start {
			return nil
		}
		if kind == 1 {
			return s.sendData(ctx, &s.fixEnc, pb, buf[start:end], off+start, s.fixCodec())
		}
		return s.sendZero(ctx, off+start, end-start)
	}
	for p := int64(0); p < n; p += bs {
		k := 1
		if sparse.IsZero(buf[p:min(p+bs, n)]) {
			k = 2
		}
		if k != kind {
			if err := emit(p); err != nil {
				return err
			}
			start, kind = p, k
		}
	}
	return emit(n)
}

func (s *sender) fixCodec() Compression {
	if s.p.compress == CompressAuto {
		return CompressNone
	}
	return s.p.compress
}
