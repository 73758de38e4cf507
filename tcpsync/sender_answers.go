package tcpsync

import (
	"bytes"
	"context"
	"fmt"

	"github.com/sparsesync/sparsesync/internal/blockhash"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

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
		case wire.Result:
			d := wire.Dec{B: body, T: t}
			k := d.U32()
			if err := d.End(); err != nil {
				return err
			}
			in, err := s.takeHashes(k)
			if err != nil {
				return err
			}
			s.unchanged(&in.c)
			s.f.progress(int64(in.c.ncmp) * s.p.bs)
			<-s.slots
		case wire.Hashes:
			d := wire.Dec{B: body, T: t}
			k, n := d.U32(), d.U32()
			if d.Err == nil && uint64(n)*8 != uint64(len(d.B)) {
				return fmt.Errorf("%w: HASHES announces %d hashes in %d bytes", ErrProtocol, n, len(d.B))
			}
			theirs := make([]uint64, n)
			for i := range theirs {
				theirs[i] = d.U64()
			}
			if err := d.End(); err != nil {
				return err
			}
			select {
			case fixes <- fixJob{k, theirs}:
			default:
				return fmt.Errorf("%w: more HASHES than chunks in flight", ErrProtocol)
			}
		case wire.DoneAck:
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
		case wire.Progress:
			if err := s.onProgress(flags, body); err != nil {
				return err
			}
		case wire.Window:
			if !s.f.windows {
				return fmt.Errorf("%w: WINDOW from a peer that did not announce windows", ErrProtocol)
			}
			select {
			case s.winAns <- bytes.Clone(body):
			default:
				return fmt.Errorf("%w: WINDOW the sender did not ask for", ErrProtocol)
			}
		case wire.Error:
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
// With wire.FlagWorked, from a peer that announced them, at any time: the
// bytes the receiver received, applied or compared, counting up and never
// past what this side sent plus twice the source's data blocks (a
// compared block that differs is applied too). It is progress as well: a receiver held to a slow budget answers
// late, and says meanwhile that it works.
func (s *sender) onProgress(flags uint8, body []byte) error {
	d := wire.Dec{B: body, T: wire.Progress}
	n := d.U64()
	if err := d.End(); err != nil {
		return err
	}
	if flags == wire.FlagBusy {
		if !s.f.busy {
			return fmt.Errorf("%w: busy PROGRESS from a peer that did not announce it", ErrProtocol)
		}
		if err := parseBusy(body); err != nil {
			return err
		}
		s.f.progress(minProgress)
		return nil
	}
	if flags == wire.FlagWorked {
		if !s.f.worked {
			return fmt.Errorf("%w: PROGRESS of work from a peer that did not announce it", ErrProtocol)
		}
		if most := 2*uint64(s.dataTotal) + uint64(s.f.out.n.Load()); n < uint64(s.workedSeen) || n > most {
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
	case n < uint64(s.readBackSeen) || n > uint64(s.dataTotal):
		return fmt.Errorf("%w: PROGRESS of %d bytes read back (was %d, data %d)", ErrProtocol, n, s.readBackSeen, s.dataTotal)
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

// fixer answers HASHES: it resends the blocks whose hashes differ, then
// FIXEND, and frees the chunk's window slot.
func (s *sender) fixer(ctx context.Context, fixes <-chan fixJob) error {
	hasher := blockhash.New(s.p.seed)
	for {
		job, ok, err := recv(ctx, fixes)
		if err != nil || !ok {
			return err
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
		o := s.q.frame(wire.FixEnd)
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
	if err := readExact(s.src, buf, off, sourceShort); err != nil {
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
