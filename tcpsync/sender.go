package tcpsync

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/sparsesync/sparsesync/sparse"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparsesync/sparsesync/internal/wire"
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
	encoder encoder  // the producer's
	batch   batchOut // the producer's runs bound for one BATCH frame
	fixEnc  encoder  // the fixer's
	sample  []byte   // scratch for CompressAuto's compressibility probe
	// doneSent is set once DONE is queued: only then may DONEACK come.
	doneSent atomic.Bool
	// readBackSeen is what the receiver's PROGRESS frames reported read
	// back so far (the answer reader's).
	readBackSeen int64
	// workedSeen is what its wire.FlagWorked PROGRESS frames reported.
	workedSeen int64
	// dataTotal is the source's data blocks (the bound of the receiver's
	// PROGRESS frames).
	dataTotal int64
	// With wire.FeatWindows: how the source's extents are walked, where the
	// first window starts (the resume offset), the destination's size,
	// and the receiver's WINDOW answers (body copies) for the producer.
	walk    extentWalk
	resume  int64
	dstSize int64
	winAns  chan []byte
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
	if size < 0 || size > wire.MaxSize {
		return s.st, fmt.Errorf("source size %d out of range", size)
	}
	if s.f.windows {
		return s.runWindowed(ctx, size)
	}
	var srcMap sparse.Map
	err := busyWhile(s.f, s.f.busy, s.f.busyFrame, func() (err error) {
		srcMap, err = s.src.Extents(ctx)
		return err
	})
	if err != nil {
		return s.st, err
	}
	if srcMap.Size() != size {
		return s.st, fmt.Errorf("%w: extent map of size %d for a source of %d", ErrSourceChanged, srcMap.Size(), size)
	}
	if err := s.f.writeFrame(wire.SrcInfo, 0, s.srcInfo(size)); err != nil {
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

	dstSize, quick, resume, err := s.dstInfo(ctx, func() int64 { return srcMap.RoundOut(s.p.bs).Bytes() })
	if err != nil || quick {
		return s.st, err
	}
	if dstSize > wire.MaxSize || resume > uint64(size) {
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
	s.dataTotal = s.plan.blocks.Bytes()
	return s.stream(ctx, first)
}

// srcInfo is the SRCINFO body: size, block size, flags, identity.
func (s *sender) srcInfo(size int64) []byte {
	var ident string
	if id, ok := s.src.(Identifier); ok {
		ident = id.Identity()
	}
	if len(ident) > wire.MaxIdentity {
		ident = ident[:wire.MaxIdentity]
	}
	var flags uint32
	if s.p.fullCompare {
		flags |= 1
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(size))
	b = binary.LittleEndian.AppendUint32(b, uint32(s.p.bs))
	b = binary.LittleEndian.AppendUint32(b, flags)
	return wire.AppendBytes(b, []byte(ident))
}

// stream sends chunks from first on, with the answers handled concurrently.
func (s *sender) stream(ctx context.Context, first int) (Stats, error) {
	g, gctx := newGroup(ctx)
	// A failure anywhere unblocks the connection (unblock), so no
	// goroutine of the group can stay stuck in the socket.
	stop := unblock(gctx, s.f.cc)
	defer stop()
	s.q = newSendq(s.f, 256)
	s.pool = newBufPool(nBuffers, wire.MaxDataPayload)
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
		if s.p.readBack && (first > 0 || s.resume > 0) {
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
		o := s.q.frame(wire.Done)
		o.u64(uint64(s.st.Size))
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

// dstInfo reads DSTINFO: the destination's size, the resume offset, and
// whether the quick check matched, in which case the sync ends here
// (data gives the source's data blocks, for the stats).
func (s *sender) dstInfo(ctx context.Context, data func() int64) (uint64, bool, uint64, error) {
	_, body, err := s.f.expectPast(wire.DstInfo)
	if err != nil {
		return 0, false, 0, err
	}
	d := wire.Dec{B: body, T: wire.DstInfo}
	dstSize, quick, resume := d.U64(), d.U8(), d.U64()
	if err := d.End(); err != nil {
		return 0, false, 0, err
	}
	if quick != 0 {
		s.st.QuickCheck = true
		s.st.DataBytes = data()
		s.st.UnchangedBytes = s.st.DataBytes
		_, err := s.finish(ctx, digest{})
		return 0, true, 0, err
	}
	return dstSize, false, resume, nil
}

// finish sends DONE and waits for the receiver's verdict (quick check path).
func (s *sender) finish(ctx context.Context, total digest) (doneAck, error) {
	b := binary.LittleEndian.AppendUint64(nil, uint64(s.st.Size))
	b = binary.LittleEndian.AppendUint64(b, total.a)
	b = binary.LittleEndian.AppendUint64(b, total.b)
	if err := s.f.send(wire.Done, 0, b); err != nil {
		return doneAck{}, err
	}
	_, body, err := s.f.expect(wire.DoneAck)
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
	d := wire.Dec{B: body, T: wire.DoneAck}
	a := doneAck{d.U64(), d.U64(), d.U64()}
	return a, d.End()
}
