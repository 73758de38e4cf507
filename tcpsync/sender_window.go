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
	var kept []sparse.Extent
	err = busyWhile(s.f, s.f.busy, s.f.busyFrame, func() (err error) {
		total, kept, err = countAndKeep(ctx, walk, size, s.p.bs)
		return err
	})
	if err != nil {
		return s.st, err
	}
	if err := s.f.mem.reserve(windowMemory, "the windows of the extent maps"); err != nil {
		return s.st, err
	}
	// The kept extents only where the budget has room once the windows
	// have theirs: they save a walk, and a session that cannot keep them
	// walks the source again instead.
	if kept != nil && s.f.mem.reserve(int64(len(kept))*keptCost, "the source's extents") == nil {
		if m, err := sparse.NewMap(size, kept...); err == nil {
			s.walk = mapWalk(m)
		}
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

// keepExtents is the most extents countAndKeep keeps (keptCost bytes of
// session memory each: the walk's and the map's copy).
const (
	keepExtents = 1 << 18
	keptCost    = 2 * 16
)

// countAndKeep counts the source's data blocks (countBlocks) and keeps
// the extents it walks, unless there are more than keepExtents (nil
// then): a source of no more is walked once, its windows then cut from
// what was kept. Walked twice, a file of 100,000 small extents cost two
// SEEK_DATA/SEEK_HOLE calls per extent twice over, a sixth of a push's CPU.
func countAndKeep(ctx context.Context, walk extentWalk, size, bs int64) (int64, []sparse.Extent, error) {
	kept, over := []sparse.Extent{}, false
	n, err := countBlocks(ctx, func(ctx context.Context, from int64, fn func(sparse.Extent) error) error {
		return walk(ctx, from, func(e sparse.Extent) error {
			if !over && len(kept) == keepExtents {
				over, kept = true, nil
			}
			if !over {
				kept = append(kept, e)
			}
			return fn(e)
		})
	}, size, bs)
	return n, kept, err
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
