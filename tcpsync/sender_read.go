package tcpsync

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/pierrec/lz4/v4"
	"github.com/sparsesync/sparsesync/internal/blockhash"
	"github.com/sparsesync/sparsesync/internal/readahead"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/qos"
	"github.com/sparsesync/sparsesync/sparse"
)

// produce reads every chunk from first on (every window's, with
// wire.FeatWindows), sends data the receiver lacks and zero markers, and queues
// SEGEND with the compare and digest sums.
func (s *sender) produce(ctx context.Context, first int) (digest, error) {
	ps := &prodState{hasher: blockhash.New(s.p.seed), sumHasher: blockhash.New(s.p.seed), dk: newDigestKey(s.p.seed),
		autoMark: time.Now(), autoBlocked: s.q.blocked.Load()}
	var total digest
	if s.f.windows {
		var err error
		if total, err = s.produceWindows(ctx, ps); err != nil {
			return total, err
		}
	} else {
		for k := first; k < s.plan.nchunks; k++ {
			d, err := s.produceChunk(ctx, ps, s.plan.chunk(k), k)
			if err != nil {
				return total, err
			}
			total.add(d)
		}
	}
	if fs, ok := s.src.(*FileSource); ok {
		if err := fs.changed(); err != nil {
			return total, err
		}
	}
	return total, nil
}

// prodState is the producer's: its hashers, scratch and CompressAuto's
// state, across chunks.
type prodState struct {
	hasher, sumHasher *blockhash.Hasher
	dk                *digestKey
	hb                []byte
	autoOn            bool
	autoMark          time.Time
	autoBlocked       int64
	sinceCheck        int64
}

// produceChunk reads chunk k, sends what the receiver lacks, takes a
// window slot if the chunk awaits an answer and queues its SEGEND; it
// returns the chunk's digest.
func (s *sender) produceChunk(ctx context.Context, ps *prodState, cv chunk, k int) (digest, error) {
	bs := s.p.bs
	compress := s.p.compress
	c := &cv
	var cdig digest
	var mine []uint64
	if c.ncmp > 0 {
		mine = make([]uint64, 0, c.ncmp)
	}
	ci := 0
	pcs := sparse.Spans(c.ext, s.readPiece())
	// The pieces are read readDepth ahead of the framing (readPieceAt),
	// which takes them in order.
	var waited time.Time // when the framing began to wait for this piece
	err := readahead.Do(ctx, len(pcs), readDepth, func(ctx context.Context, i int) (pieceRead, error) {
		return s.readPieceAt(ctx, pcs[i])
	}, func(i int, rp pieceRead) error {
		// Waiting for a buffer means the writer (the network) is behind;
		// the framing stalled on it for at most the time it waited here.
		s.q.blocked.Add(int64(min(rp.poolWait, time.Since(waited))))
		pc, pb := pcs[i], rp.pb
		defer pb.unref()
		off, n := pc.Off, pc.End-pc.Off
		buf := pb.b[:n]
		codec := compress
		if compress == CompressAuto {
			codec = CompressNone
			if ps.autoOn {
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
				err = s.addData(ctx, pb, buf[runStart:end], off+runStart, codec)
			} else if err = s.flushBatch(ctx, codec); err == nil {
				err = s.sendZero(ctx, off+runStart, end-runStart)
			}
			runKind = 0
			return err
		}
		for _, se := range pc.Ext {
			lo, hi := se.Off-off, se.End()-off
			for p := lo; p < hi; p += bs {
				blk := buf[p:min(p+bs, hi)]
				at := off + p
				zero := sparse.IsZero(blk)
				if !zero {
					cdig.addBlock(ps.dk, at, blk)
				}
				for ci < len(c.cmp) && c.cmp[ci].End() <= at {
					ci++
				}
				kind := 1
				if zero {
					kind = 2
				}
				if ci < len(c.cmp) && c.cmp[ci].Off <= at {
					mine = append(mine, ps.hasher.Sum(blk))
					kind = 0
				}
				if kind != runKind {
					if err := flushRun(p); err != nil {
						return err
					}
					runStart, runKind = p, kind
				}
			}
			if err := flushRun(hi); err != nil {
				return err
			}
		}
		if err := s.flushBatch(ctx, codec); err != nil {
			return err
		}
		if compress == CompressAuto {
			if ps.sinceCheck += n; ps.sinceCheck >= autoWindow {
				now, bl := time.Now(), s.q.blocked.Load()
				ps.autoOn = autoDecide(ps.autoOn, ps.sinceCheck, now.Sub(ps.autoMark), time.Duration(bl-ps.autoBlocked)) && s.compressible(buf)
				ps.autoMark, ps.autoBlocked, ps.sinceCheck = now, bl, 0
			}
		}
		waited = time.Now()
		return nil
	}, func(rp pieceRead) { rp.pb.unref() })
	if err != nil {
		return cdig, err
	}
	if len(mine) != c.ncmp {
		return cdig, fmt.Errorf("internal: chunk %d hashed %d of %d compare blocks", k, len(mine), c.ncmp)
	}
	// Take a window slot for a chunk that awaits an answer.
	if c.ncmp > 0 {
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return cdig, context.Cause(ctx)
		}
		s.mu.Lock()
		s.hashes[uint32(k)] = inflight{c: cv, hashes: mine}
		s.mu.Unlock()
	}
	o := s.q.frame(wire.SegEnd)
	o.u32(uint32(k))
	var cmpSum uint64
	if c.ncmp > 0 {
		ps.hb = appendHashes(ps.hb[:0], mine)
		cmpSum = ps.sumHasher.Sum(ps.hb)
		o.u8(1)
	} else {
		o.u8(0)
	}
	o.u64(cmpSum)
	o.u64(cdig.a)
	o.u64(cdig.b)
	if err := s.q.put(ctx, o); err != nil {
		return cdig, err
	}
	return cdig, nil
}

// readDepth is how many of a chunk's reads the sender keeps in flight
// ahead of its framing. A cold source is read with O_DIRECT, which gets no
// readahead from the page cache: one read at a time left the disk idle
// while a piece was framed and queued. The reads take buffers from the
// sender's pool (nBuffers), where the framing, a compressed copy and a
// resend need one each at most besides.
const readDepth = 4

// pieceRead is one piece read ahead: its buffer, and how long the read
// waited for that buffer (the network behind).
type pieceRead struct {
	pb       *pbuf
	poolWait time.Duration
}

// readPieceAt takes a buffer from the pool and reads pc into it, within
// the read budget.
func (s *sender) readPieceAt(ctx context.Context, pc sparse.Span) (pieceRead, error) {
	waitStart := time.Now()
	pb, err := s.pool.get(ctx)
	if err != nil {
		return pieceRead{}, err
	}
	rp := pieceRead{pb: pb, poolWait: time.Since(waitStart)}
	n := pc.End - pc.Off
	if err := s.f.m.read(pc.Data()); err != nil {
		pb.unref()
		return pieceRead{}, err
	}
	if err := readExact(s.src, pb.b[:n], pc.Off, sourceShort); err != nil {
		pb.unref()
		return pieceRead{}, err
	}
	return rp, nil
}

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

// sendData queues a DATA frame pointing into pb (compressed into a copy if
// that pays).
func (s *sender) sendData(ctx context.Context, enc *encoder, pb *pbuf, raw []byte, off int64, codec Compression) error {
	o := s.q.frame(wire.Data)
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
	o := s.q.frame(wire.Zero)
	o.u64(uint64(off))
	o.u64(uint64(n))
	return s.q.put(ctx, o)
}

// readPiece is the most the sender reads at once, and so puts in one DATA
// frame: a piece of the read or wire budget (whole blocks) while either is
// limited, so that data leaves at a steady pace rather than in reads of a
// second or more of the rate, and a frame reaches the peer within a tenth
// of a second of the rate, well within its read deadline.
func (s *sender) readPiece() int64 {
	b := s.f.m.budget()
	p := int64(wire.MaxDataPayload)
	for _, l := range []*qos.Limiter{b.Read, b.Wire} {
		if lp := l.Piece(); lp > 0 {
			p = min(p, max(lp/s.p.bs*s.p.bs, s.p.bs))
		}
	}
	return p
}
