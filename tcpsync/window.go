package tcpsync

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/sparsesync/sparsesync/internal/destplan"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// Windows of the maps (wire.FeatWindows). Instead of both whole maps up front,
// the two sides walk the file in windows [lo, hi): the sender sends its
// data extents from lo on in one WINDOW frame, closing the window once
// their encoding passes windowBudget (at the next block boundary); the
// receiver answers with its own extents in the window, in one WINDOW frame
// too, and may end the window sooner (its own map is denser there); both
// derive the window's plan with newPlan from the two pieces, and the
// window's chunks flow as before. The next window starts where this one
// ended, once every chunk of this one is settled. A session holds one
// window of each map, whatever the file's extent count.
const (
	// windowBudget is the encoded size of a window's extents at which
	// the window closes (at the next block boundary): some 4,000 to
	// 8,000 extents.
	windowBudget = 16 << 10
	// windowMemory is what a windowed session charges its budget, once,
	// for the two maps of a window and the window's plan: a map of
	// wire.MaxWindowMap bytes holds at most wire.MaxWindowMap/2 extents.
	windowMemory = 2 * (wire.MaxWindowMap / 2) * extentCost
)

// extentWalk calls fn for the data extents that end after from, in
// increasing order, the first clipped to start at from; fn's error stops
// it and is returned.
type extentWalk func(ctx context.Context, from int64, fn func(sparse.Extent) error) error

// errWindowFull stops a walk whose window is complete.
var errWindowFull = errors.New("window complete")

// collectWindow walks the extents from lo up to end, clipped to them, until
// their encoding passes windowBudget: the window then ends at the next
// block boundary (the extents crossing it are clipped). It returns the
// extents and the window's end (end when the walk got there).
func collectWindow(ctx context.Context, walk extentWalk, lo, end, bs int64) ([]sparse.Extent, int64, error) {
	var ext []sparse.Extent
	hi, n := end, 0
	var prev int64
	closed := false
	err := walk(ctx, lo, func(e sparse.Extent) error {
		if e.Off >= hi {
			return errWindowFull
		}
		if e.Off < lo {
			e = sparse.Extent{Off: lo, Len: e.End() - lo}
		}
		e.Len = min(e.Len, hi-e.Off)
		if e.Len <= 0 {
			return nil
		}
		ext = append(ext, e)
		n += wire.UvarintLen(uint64(e.Off-prev)) + wire.UvarintLen(uint64(e.Len))
		prev = e.End()
		if !closed && n >= windowBudget {
			closed = true
			hi = min(end, alignUp(e.End(), bs))
		}
		if e.End() >= hi {
			return errWindowFull
		}
		return nil
	})
	if err != nil && !errors.Is(err, errWindowFull) {
		return nil, 0, err
	}
	return ext, hi, nil
}

// fitWindow shortens the window [lo, hi) of ext until its map's encoding
// fits a WINDOW frame (a window closes near windowBudget, so only extents
// split afterwards, or crowded in one block, get here), at block boundaries.
func fitWindow(ext []sparse.Extent, lo, hi, bs int64) ([]sparse.Extent, int64, error) {
	for wire.WindowMapLen(ext, hi) > wire.MaxWindowMap {
		mid := ext[len(ext)/2]
		cut := mid.Off / bs * bs
		if cut <= lo {
			cut = alignUp(mid.Off+1, bs)
		}
		kept := clipExtents(ext, cut)
		if cut >= hi || len(kept) == len(ext) {
			return nil, 0, fmt.Errorf("%w: more data extents in the block of %d bytes at %d than one window of the map "+
				"carries (%d bytes of map): sync with a smaller block size", ErrTooManyExtents, bs, cut-bs, wire.MaxWindowMap)
		}
		ext, hi = kept, cut
	}
	return ext, hi, nil
}

// clipExtents keeps the parts of ext before end (ext sorted).
func clipExtents(ext []sparse.Extent, end int64) []sparse.Extent {
	i := sort.Search(len(ext), func(i int) bool { return ext[i].End() >= end })
	if i < len(ext) && ext[i].Off < end {
		out := append(ext[:i:i], sparse.Extent{Off: ext[i].Off, Len: end - ext[i].Off})
		return out
	}
	return ext[:i]
}

func alignUp(n, bs int64) int64 { return (n + bs - 1) / bs * bs }

// windowPlan is newPlan over the window [lo, hi): src holds the source's
// extents there, dst the destination's (of size dstSize). The maps newPlan
// takes are the window's pieces in a map of size hi for the source, and of
// the destination's size for the destination (empty when it ends before
// the window), so that the rules at the destination's end (its last
// partial block, a size that differs) apply in the window that holds it.
// hidden is the receiver's hidden allocation in the window (the sender
// has none): it changes only the plan's punch, as in planFor.
func windowPlan(src, dst []sparse.Extent, hidden sparse.Map, dstSize, lo, hi, bs int64) (*plan, error) {
	sm, err := sparse.FromExtents(hi, src)
	if err != nil {
		return nil, fmt.Errorf("%w: window [%d,%d) of the source's map: %w", ErrProtocol, lo, hi, err)
	}
	dm, _ := sparse.NewMap(hi)
	if dstSize > lo {
		if dm, err = sparse.FromExtents(dstSize, dst); err != nil {
			return nil, fmt.Errorf("%w: window [%d,%d) of the destination's map: %w", ErrProtocol, lo, hi, err)
		}
	}
	return planFor(destplan.Input{Src: sm, Dst: dm, Hidden: hidden, Unit: bs})
}

// sourceWalk is how the sender walks its source's extents: from any offset
// through ExtentWalker, else (a Source that only gives its whole map) over
// that map, held by this side.
func sourceWalk(ctx context.Context, src Source) (extentWalk, error) {
	if w, ok := src.(ExtentWalker); ok {
		return w.WalkExtents, nil
	}
	m, err := src.Extents(ctx)
	if err != nil {
		return nil, err
	}
	if m.Size() != src.Size() {
		return nil, fmt.Errorf("%w: extent map of size %d for a source of %d", ErrSourceChanged, m.Size(), src.Size())
	}
	return mapWalk(m), nil
}

// mapWalk walks a map's extents.
func mapWalk(m sparse.Map) extentWalk {
	return func(ctx context.Context, from int64, fn func(sparse.Extent) error) error {
		ext := m.Extents()
		for i := sort.Search(len(ext), func(i int) bool { return ext[i].End() > from }); i < len(ext); i++ {
			e := ext[i]
			if e.Off < from {
				e = sparse.Extent{Off: from, Len: e.End() - from}
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	}
}

// countBlocks is what a map's RoundOut(bs).Bytes() would be, counted as a
// walk streams the extents (nothing held).
func countBlocks(ctx context.Context, walk extentWalk, size, bs int64) (int64, error) {
	var n, end int64
	err := walk(ctx, 0, func(e sparse.Extent) error {
		a, b := max(e.Off/bs*bs, end), min(alignUp(e.End(), bs), size)
		if b > a {
			n, end = n+b-a, b
		}
		return nil
	})
	return n, err
}
