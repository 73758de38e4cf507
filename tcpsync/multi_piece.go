package tcpsync

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/sparsesync/sparsesync/internal/blockhash"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// want is a piece asked of a source and not yet answered.
type want struct {
	k      int
	lo, hi int64           // with piece maps: the piece's range
	mapped bool            // its map is known (at once without piece maps)
	src    []sparse.Extent // the agreed data extents in the piece's blocks
	ext    []sparse.Extent // the piece's blocks
	n      int64
	buf    []byte
	held   []bool // blocks the target holds data in (their bytes are in buf)
	sent   []bool // blocks the source sent (DATA or ZERO)
	zero   []bool // blocks the source sent as ZERO
	copied int64
	zeroed int64
}

// work asks source i for pieces, fetchDepth at a time, until none is left.
func (m *multi) work(ctx context.Context, i int, f *framer) (err error) {
	var pending []*want
	defer func() {
		for _, w := range pending {
			m.queue.requeue(w.k)
		}
		if err != nil {
			m.mu.Lock()
			m.st.Sources[i].Failures += len(pending)
			m.mu.Unlock()
		}
	}()
	bufs := make([][]byte, 0, fetchDepth+1)
	h := blockhash.New(m.seed)
	for {
		for len(pending) < fetchDepth {
			f.wd.hold(1)
			k, ok := m.queue.take(len(pending) > 0)
			f.wd.hold(-1)
			if !ok {
				break
			}
			var buf []byte
			if n := len(bufs); n > 0 {
				buf, bufs = bufs[n-1], bufs[:n-1]
			} else {
				buf = make([]byte, max(1, pieceBytes/m.agreed.bs)*m.agreed.bs)
			}
			w, err := m.ask(ctx, f, h, k, buf)
			if le := (*localError)(nil); errors.As(err, &le) {
				// Not the source's fault: the target could not be read.
				m.queue.requeue(k)
				m.fail(err)
				return err
			}
			pending = append(pending, w)
			if err != nil {
				return err
			}
		}
		if len(pending) == 0 {
			if err := m.queue.failed(); err != nil {
				return err
			}
			if err := f.send(wire.Done, 0); err != nil {
				return err
			}
			_, _, err := f.expect(wire.DoneAck)
			return err
		}
		w := pending[0]
		if err := m.receive(ctx, f, h, pending); err != nil {
			if le := (*localError)(nil); errors.As(err, &le) {
				m.fail(err)
			}
			return err
		}
		pending = pending[1:]
		if err := m.apply(ctx, f, i, w); err != nil {
			// Not the source's fault: a local write failed. The pull ends.
			m.queue.requeue(w.k)
			m.fail(err)
			return err
		}
		bufs = append(bufs, w.buf[:cap(w.buf)])
	}
}

// ask asks source for piece k: with piece maps, its map first (the
// blocks are asked for when it comes, onPieceMap); else its blocks at once.
// A *localError: the target could not be read.
func (m *multi) ask(ctx context.Context, f *framer, h *blockhash.Hasher, k int, buf []byte) (*want, error) {
	if m.agreed.maps {
		w := &want{k: k, hi: m.agreed.pieces[k].hi, buf: buf}
		if k > 0 {
			w.lo = m.agreed.pieces[k-1].hi
		}
		return w, f.send(wire.Fetch, wire.FlagPieceMap, binary.LittleEndian.AppendUint32(nil, uint32(k)))
	}
	ext, n := m.ps.piece(k)
	w := &want{k: k, ext: ext, n: n, buf: buf[:n], mapped: true}
	src := m.agreed.m.Extents()
	first := sort.Search(len(src), func(j int) bool { return src[j].End() > ext[0].Off })
	last := sort.Search(len(src), func(j int) bool { return src[j].Off >= ext[len(ext)-1].End() })
	w.src = src[first:max(first, last)]
	return w, m.request(ctx, f, h, w)
}

// request reads the target's blocks of w (those it holds data in) into
// its buffer and sends FETCH with their hashes. A failure to walk or read
// the target is a *localError (this side's, not the source's).
func (m *multi) request(ctx context.Context, f *framer, h *blockhash.Hasher, w *want) error {
	nb := 0
	_ = eachBlock(w.ext, m.agreed.bs, func(int, int64, int64, int64) error { nb++; return nil })
	w.held, w.sent, w.zero = make([]bool, nb), make([]bool, nb), make([]bool, nb)
	clear(w.buf)
	if err := m.markHeld(ctx, w); err != nil {
		return &localError{err}
	}
	bitmap := make([]byte, (nb+7)/8)
	var hashes []byte
	rd := m.t.w.OS()
	if m.agreed.maps && m.t.final != nil {
		rd = m.t.final // with atomic, the temporary file is seeded as pieces are written
	}
	// Held blocks next to each other in the file (and so in the buffer) are
	// read at once, then hashed one by one: a target that holds most of a
	// piece costs a few reads, not one per block. A run stays within a
	// piece of the read budget while it is limited, so reads keep its pace.
	most := int64(len(w.buf))
	if p := f.m.budget().Read.Piece(); p > 0 {
		most = max(p, m.agreed.bs)
	}
	type held struct {
		b int
		n int64
	}
	var run []held // blocks not read yet, each right after the one before
	var runOff, runAt, runN int64
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		if err := f.m.read(runN); err != nil {
			return err
		}
		if _, err := rd.ReadAt(w.buf[runAt:runAt+runN], runOff); err != nil {
			return &localError{fmt.Errorf("reading %s at %d: %w", m.t.display, runOff, err)}
		}
		at := runAt
		for _, r := range run {
			bitmap[r.b/8] |= 1 << (r.b % 8)
			hashes = binary.LittleEndian.AppendUint64(hashes, h.Sum(w.buf[at:at+r.n]))
			at += r.n
		}
		run = run[:0]
		return nil
	}
	err := eachBlock(w.ext, m.agreed.bs, func(b int, off, at, bn int64) error {
		if !w.held[b] {
			return flush()
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if len(run) > 0 && (off != runOff+runN || at != runAt+runN || runN+bn > most) {
			if err := flush(); err != nil {
				return err
			}
		}
		if len(run) == 0 {
			runOff, runAt, runN = off, at, 0
		}
		run = append(run, held{b, bn})
		runN += bn
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return err
	}
	b := binary.LittleEndian.AppendUint32(nil, uint32(w.k))
	b = binary.LittleEndian.AppendUint64(b, m.seed)
	b = binary.LittleEndian.AppendUint32(b, uint32(nb))
	return f.send(wire.Fetch, 0, b, bitmap, hashes)
}

// localError is a failure of this side (the target could not be read),
// not the source's: the pull ends.
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// markHeld sets w.held for the blocks the target holds data in.
func (m *multi) markHeld(ctx context.Context, w *want) error {
	if m.agreed.maps {
		return m.markHeldWalk(ctx, w)
	}
	dext := m.dstMap.Extents()
	return eachBlock(w.ext, m.agreed.bs, func(b int, off, _, bn int64) error {
		j := sort.Search(len(dext), func(j int) bool { return dext[j].End() > off })
		w.held[b] = j < len(dext) && dext[j].Off < off+bn
		return nil
	})
}

// receive reads the answer to pending[0] up to its PIECEEND and checks
// its sum; with piece maps, the maps of the pieces after it may come
// first (onPieceMap).
func (m *multi) receive(ctx context.Context, f *framer, h *blockhash.Hasher, pending []*want) error {
	w := pending[0]
	for {
		t, _, body, err := f.readFrame()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("%w: %w", errIdle, err)
			}
			return err
		}
		switch t {
		case wire.Window:
			if err := m.onPieceMap(ctx, f, h, pending, body); err != nil {
				return err
			}
		case wire.Data, wire.Zero:
			if !w.mapped {
				return fmt.Errorf("%w: %s before the map of piece %d", ErrProtocol, t, w.k)
			}
			if err := m.onRange(f, w, t, body); err != nil {
				return err
			}
		case wire.PieceEnd:
			d := wire.Dec{B: body, T: t}
			k := d.U32()
			if err := d.End(); err != nil {
				return err
			}
			if int(k) != w.k || !w.mapped {
				return fmt.Errorf("%w: PIECEEND of piece %d, awaiting %d", ErrProtocol, k, w.k)
			}
			if !m.pieceOK(w) {
				return fmt.Errorf("%w: piece %d (offset %d, %d bytes)", ErrPieceMismatch, w.k, w.ext[0].Off, w.n)
			}
			return nil
		case wire.Error:
			return decodeError(body)
		default:
			return fmt.Errorf("%w: %s while awaiting piece %d", ErrProtocol, t, w.k)
		}
	}
}

// onRange applies a DATA or ZERO range of the source to w's buffer: whole
// blocks of the piece, each sent at most once.
func (m *multi) onRange(f *framer, w *want, t wire.Type, body []byte) error {
	d := wire.Dec{B: body, T: t}
	var off, n uint64
	var raw []byte
	if t == wire.Data {
		off, n = d.U64(), uint64(d.U32())
		raw, d.B = d.B, nil
		if d.Err == nil && uint64(len(raw)) != n {
			return fmt.Errorf("%w: DATA of %d bytes says %d", ErrProtocol, len(raw), n)
		}
	} else {
		off, n = d.U64(), d.U64()
	}
	if err := d.End(); err != nil {
		return err
	}
	o, l, err := wire.OffLen(t, off, n, m.agreed.size)
	if err != nil {
		return err
	}
	// Find the range's blocks in the piece: it must cover whole blocks.
	done := int64(0)
	err = eachBlock(w.ext, m.agreed.bs, func(b int, boff, at, bn int64) error {
		if boff+bn <= o || boff >= o+l {
			return nil
		}
		if boff < o || boff+bn > o+l || w.sent[b] {
			return fmt.Errorf("%w: %s at %d of %d bytes splits or repeats a block of piece %d", ErrProtocol, t, o, l, w.k)
		}
		w.sent[b] = true
		if t == wire.Data {
			copy(w.buf[at:at+bn], raw[boff-o:boff-o+bn])
		} else {
			clear(w.buf[at : at+bn])
			w.zero[b] = true
		}
		done += bn
		return nil
	})
	if err != nil {
		return err
	}
	if done != l {
		return fmt.Errorf("%w: %s at %d of %d bytes outside piece %d", ErrProtocol, t, o, l, w.k)
	}
	if t == wire.Data {
		w.copied += l
	} else {
		w.zeroed += l
	}
	f.progress(l)
	return nil
}

// apply writes a verified piece: the blocks the source sent, data only
// where the agreed map has data, and holes for zero blocks over the
// target's data.
func (m *multi) apply(ctx context.Context, f *framer, i int, w *want) error {
	if m.agreed.maps {
		if err := m.clearPiece(ctx, f, w); err != nil {
			return err
		}
	}
	src := w.src
	var unchanged int64
	err := eachBlock(w.ext, m.agreed.bs, func(b int, off, at, bn int64) error {
		if !w.sent[b] {
			if w.held[b] {
				unchanged += bn
			}
			return nil
		}
		if w.zero[b] {
			if w.held[b] {
				if _, err := m.t.w.Zero(off, bn); err != nil {
					return fmt.Errorf("%s: %w", m.t.display, err)
				}
				m.punchedN.Add(bn)
			}
			return nil
		}
		end := off + bn
		j := sort.Search(len(src), func(j int) bool { return src[j].End() > off })
		for ; j < len(src) && src[j].Off < end; j++ {
			a, e := max(src[j].Off, off), min(src[j].End(), end)
			if err := f.m.write(e - a); err != nil {
				return err
			}
			if _, err := m.t.w.WriteAt(w.buf[at+a-off:at+e-off], a); err != nil {
				return fmt.Errorf("writing %s at %d: %w", m.t.display, a, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := m.spill.put(w); err != nil {
		return err
	}
	m.dataN.Add(w.n)
	m.queue.done(w.k)
	if p := m.c.Progress; p != nil {
		p.Done.Add(w.n)
	}
	m.mu.Lock()
	s := &m.st.Sources[i]
	s.Pieces++
	s.CopiedBytes += w.copied
	s.ZeroBytes += w.zeroed
	s.UnchangedBytes += unchanged
	m.mu.Unlock()
	return nil
}
