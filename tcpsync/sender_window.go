package tcpsync

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// runWindowed is the sender's side with wire.FeatWindows: SRCINFO carries the
// source's data-block bytes (counted as the walk streams, for progress and
// the bounds of the receiver's PROGRESS) and no map; DSTINFO carries none
// either; the maps then cross a window at a time (produceWindows).
func (s *sender) runWindowed(ctx context.Context, size int64) (Stats, error) {
	walk, err := sourceWalk(ctx, s.src)
	if err != nil {
		return s.st, err
	}
	s.walk = walk
	var total int64
	err = busyWhile(s.f, s.f.busy, s.f.busyFrame, func() (err error) {
		total, err = countBlocks(ctx, walk, size, s.p.bs)
		return err
	})
	if err != nil {
		return s.st, err
	}
	if err := s.f.mem.reserve(windowMemory, "the windows of the extent maps"); err != nil {
		return s.st, err
	}
	b := binary.LittleEndian.AppendUint64(s.srcInfo(size), uint64(total))
	if err := s.f.send(wire.SrcInfo, 0, b); err != nil {
		return s.st, err
	}
	s.st.Size, s.dataTotal = size, total
	if s.p.progress != nil {
		s.p.progress.Total.Store(total)
	}
	dstSize, quick, resume, err := s.dstInfo(ctx, func() int64 { return total })
	if err != nil || quick {
		return s.st, err
	}
	if dstSize > wire.MaxSize || resume > uint64(size) || (resume%uint64(s.p.bs) != 0 && resume != uint64(size)) {
		return s.st, fmt.Errorf("%w: DSTINFO size %d / resume %d out of range", ErrProtocol, dstSize, resume)
	}
	s.dstSize, s.resume = int64(dstSize), int64(resume)
	s.st.ResumedFrom = s.resume
	s.winAns = make(chan []byte, 1)
	return s.stream(ctx, 0)
}

// produceWindows walks the file from the resume offset a window at a
// time: the source's piece out, the receiver's piece back, the window's
// plan (newPlan, as the receiver derives it), its chunks; the next window
// starts once every chunk of this one is answered (drain), so the
// receiver holds one window's state too. Chunks are numbered across
// windows from 0.
func (s *sender) produceWindows(ctx context.Context, ps *prodState) (digest, error) {
	var total digest
	for lo, base := s.resume, 0; lo < s.st.Size; {
		if lo > s.resume {
			if err := s.drain(ctx); err != nil {
				return total, err
			}
		}
		ext, hi, err := s.sourceWindow(ctx, lo, s.st.Size)
		if err != nil {
			return total, err
		}
		body, err := wire.WindowFrame(lo, hi, ext)
		if err != nil {
			return total, err
		}
		o := s.q.frame(wire.Window)
		o.payload = body
		if err := s.q.put(ctx, o); err != nil {
			return total, err
		}
		var ans []byte
		select {
		case ans = <-s.winAns:
		case <-ctx.Done():
			return total, context.Cause(ctx)
		}
		whi, dst, err := wire.ParseWindow(ans, lo, hi, s.p.bs)
		if err != nil {
			return total, err
		}
		p, err := windowPlan(clipExtents(ext, whi), dst, sparse.Map{}, s.dstSize, lo, whi, s.p.bs)
		if err != nil {
			return total, err
		}
		s.st.DataBytes += p.dataBytes
		for j := range p.nchunks {
			d, err := s.produceChunk(ctx, ps, p.chunk(j), base+j)
			if err != nil {
				return total, err
			}
			total.add(d)
		}
		base += p.nchunks
		lo = whi
	}
	return total, nil
}

// drain waits until every chunk in flight is answered (all window slots
// free), then frees the slots again.
func (s *sender) drain(ctx context.Context) error {
	for range window {
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	for range window {
		<-s.slots
	}
	return nil
}

// sourceWindow is the source's window from lo, up to end: its data
// extents there as Extents would give them (a FileSource's unstored zeros
// taken out), in a WINDOW frame's room.
func (s *sender) sourceWindow(ctx context.Context, lo, end int64) ([]sparse.Extent, int64, error) {
	ext, hi, err := collectWindow(ctx, s.walk, lo, end, s.p.bs)
	if err != nil {
		return nil, 0, err
	}
	if fs, ok := s.src.(*FileSource); ok {
		m, err := sparse.NewMap(hi, ext...)
		if err != nil {
			return nil, 0, err
		}
		if m, err = fs.dataOnly(ctx, m); err != nil {
			return nil, 0, err
		}
		ext = m.Extents()
	}
	return fitWindow(ext, lo, hi, s.p.bs)
}
