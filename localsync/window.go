package localsync

import (
	"errors"
	"sort"

	"github.com/sparsesync/sparsesync/internal/destplan"
	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/sparse"
)

// windowExtents is how many extents of each file a window holds: the
// source's window closes at its windowExtents-th extent, and sooner where
// the destination's map is denser. With the maps derived from them (the
// plan, the jobs' batches) a window takes some 0.5 MiB, and two or three
// are held at once (one planned while the workers copy the last ones).
// 4,096 as tcpsync's windows; at 16,384 a copy of 100,000 extents held
// 2.8 MiB more than one of 25,000 (TestWindowsHoldMemoryFixed).
const windowExtents = 4096

// window is the plan of [lo, hi): what is copied without reading the
// destination, what is compared, what is made a hole.
type window struct {
	lo, hi               int64
	missing, both, punch sparse.Map
}

// copyWindows plans the copy a window at a time, from the source's and the
// destination's extents in the window (destplan, as over whole maps: its
// rules are per byte, so the window plans add up to the whole plan), and
// hands each window's jobs to the workers, which keep running across
// windows: the next window is planned while they copy this one.
func (e *engine) copyWindows(w *sparse.Walker, d *dstSide) error {
	workers := inFlight
	if d.w != nil || d.all {
		// A comparison waits on two reads (see pipeline).
		workers = 2 * inFlight
	}
	p := e.startPipeline(workers, !e.zeroScan && !d.all)
	var copied, compared, zeroed int64
	for lo := int64(0); lo < e.size && p.ctx.Err() == nil; {
		win, err := e.planWindow(w, d, lo)
		if err != nil {
			p.fail(err)
			break
		}
		copied, compared, zeroed = copied+win.missing.Bytes(), compared+win.both.Bytes(), zeroed+win.punch.Bytes()
		// Holes first: exact to the source's holes, in ranges no job of
		// an earlier window touches.
		for _, x := range win.punch.Extents() {
			if err := e.zeroRange(x.Off, x.Len); err != nil {
				p.fail(err)
				break
			}
		}
		p.send(jobCopy, win.missing)
		p.send(jobCompare, win.both)
		lo = win.hi
	}
	err := p.wait()
	e.log.Debug("localsync: plan", "src", e.src.Name(), "dst", e.dst.Name(), "size", e.size,
		"data", e.dataBytes(), "copy", copied, "compare", compared, "zero", zeroed)
	return err
}

// planWindow plans the window from lo: the source's next windowExtents
// extents, ended sooner where the destination holds more in that range.
func (e *engine) planWindow(w *sparse.Walker, d *dstSide, lo int64) (window, error) {
	src, hi, err := w.Window(e.ctx, lo, e.size, windowExtents)
	if err != nil {
		return window{}, err
	}
	var dst []sparse.Extent
	switch {
	case d.all:
		dst = []sparse.Extent{{Off: lo, Len: hi - lo}}
	case d.w != nil:
		var h int64
		if dst, h, err = d.w.Window(e.ctx, lo, hi, windowExtents); err != nil {
			return window{}, err
		}
		if h < hi {
			hi = h
			// The source's extents end at hi, the last one cut there.
			i := sort.Search(len(src), func(i int) bool { return src[i].End() > hi })
			if i < len(src) && src[i].Off < hi {
				src[i].Len = hi - src[i].Off
				i++
			}
			src = src[:i]
		}
	}
	walked, err := sparse.FromExtents(hi, src)
	if err != nil {
		return window{}, err
	}
	if !e.counted {
		e.total += walked.Bytes() // no worker reads it: no progress callback
	}
	in := destplan.Input{Src: walked, Unit: 1} // localsync compares exact bytes
	if e.unstored && walked.Len() > 0 {
		if z := sparse.UnstoredZeros(e.ctx, e.src, walked, nil); z.Len() > 0 {
			e.log.Debug("localsync: unwritten ranges read as holes", "src", e.src.Name(), "bytes", z.Bytes(), "ranges", z.Len())
			in.Src = walked.Difference(z)
			e.unstoredBytes.Add(z.Bytes())
		}
	}
	if in.Dst, err = sparse.FromExtents(hi, dst); err != nil {
		return window{}, err
	}
	if d.mayHide {
		if in.Hidden, err = sparse.HiddenAllocationIn(e.ctx, e.dst.OS(), in.Dst, lo); err != nil {
			return window{}, err
		}
	}
	if in.Hidden.Len() > 0 && e.sourceMayHide(w) {
		// Where the source has its own preallocation the destination's
		// is exact (a whole-file clone on btrfs copies it), and punching
		// it would make every re-sync write.
		if in.Keep, err = sparse.HiddenAllocationIn(e.ctx, e.src, walked, lo); err != nil {
			return window{}, err
		}
	}
	plan, err := destplan.Make(in)
	if err != nil {
		return window{}, err
	}
	win := window{lo: lo, hi: hi, missing: plan.Copy(), both: plan.Compare, punch: plan.Punch}
	e.reclone(&win, d)
	return win, nil
}

// sourceMayHide reports whether the source may hold hidden preallocations
// (sparse.Walker.Tally), walking it with w the first time it is asked:
// only a window whose destination hides some asks.
func (e *engine) sourceMayHide(w *sparse.Walker) bool {
	if e.srcHide == nil {
		_, hide, err := w.Tally(e.ctx)
		// Unknown: keep (do not punch) what may be the source's own.
		e.srcHide = new(hide || err != nil)
	}
	return *e.srcHide
}

// reclone takes out of the window's comparison what needs no reading: the
// ranges the destination still shares with the source, and, where both
// files can reflink, the long ranges, which are cloned instead.
func (e *engine) reclone(win *window, d *dstSide) {
	if win.both.Len() > 0 && !e.zeroScan && !d.all {
		shared := e.sharedRanges(win.lo, win.hi).Intersect(win.both)
		e.unchanged.Add(shared.Bytes())
		e.done.Add(shared.Bytes())
		win.both = win.both.Difference(shared)
	}
	if win.both.Len() > 0 && e.allowClone && !e.cloneOnly {
		// Re-sync by cloning: where source and destination share a
		// filesystem that can reflink, the destination's unshared data
		// becomes the source's blocks, range by range, with no byte read
		// or written (as cp --reflink re-copies a file, but ranges
		// already shared are left alone). Ranges shorter than cloneRunMin
		// are compared instead: each FICLONERANGE is a transaction that
		// flushes its source range, and thousands of small ones cost more
		// than reading them (writeChanged). Reflink never compares all.
		if long := longRanges(win.both, cloneRunMin); long.Len() > 0 && e.cloneWorks() {
			win.missing = win.missing.Union(long)
			win.both = win.both.Difference(long)
		}
	}
}

// errShares stops the walk of a destination that shares a block.
var errShares = errors.New("shares blocks")

// dstShares reports whether the destination shares any block with another
// file (the source or any other: FIEMAP's shared flag), walking its map up
// to the first shared extent.
func (e *engine) dstShares() (bool, error) {
	err := sparse.Fiemap(e.ctx, e.dst.OS(), 0, e.size, func(x sparse.FiemapExtent) error {
		if x.Flags&sparse.FiemapShared != 0 {
			return errShares
		}
		return nil
	})
	if errors.Is(err, errShares) {
		return true, nil
	}
	return false, err
}

// sharesFlushed reports whether the destination shares any block (one
// FIEMAP, stopped at the first) and, if so, flushes both files, so that
// dirty pages cannot hide behind an old mapping. It looks once per copy
// and keeps the answer, and the error that made it false.
func (e *engine) sharesFlushed() (bool, error) {
	if !e.sharedChecked {
		e.sharedChecked = true
		shares, err := e.dstShares()
		if err == nil && shares {
			if err = target.Fdatasync(e.src); err == nil {
				err = e.dst.Sync()
			}
		}
		e.mayShare, e.shareErr = shares && err == nil, err
	}
	return e.mayShare, e.shareErr
}

// sharesSourceBlocks reports whether any range of the destination maps the
// source's own blocks at the same offsets (sparse.SharedRangesIn), looked
// for a window of the source at a time, so that it holds no more shared
// records than the copy's windows do, and stopped at the first.
func (e *engine) sharesSourceBlocks(w *sparse.Walker) (bool, error) {
	for lo := int64(0); lo < e.size; {
		_, hi, err := w.Window(e.ctx, lo, e.size, windowExtents)
		if err != nil {
			return false, err
		}
		m, err := sparse.SharedRangesIn(e.ctx, e.src, e.dst.OS(), lo, hi)
		if err != nil {
			return false, err
		}
		if m.Bytes() > 0 {
			return true, nil
		}
		lo = hi
	}
	return false, nil
}

// sharedRanges returns the ranges of [lo, hi) where the destination maps
// the same physical blocks as the source at the same offsets (a reflink
// copy neither side has rewritten since, sparse.SharedRangesIn): equal
// without reading. The first time, it looks whether the destination
// shares any block at all (one FIEMAP, stopped at the first) and, if so,
// flushes both files, so that dirty pages cannot hide behind an old
// mapping; a destination that shares nothing costs that FIEMAP only.
func (e *engine) sharedRanges(lo, hi int64) sparse.Map {
	empty, _ := sparse.NewMap(hi)
	if shares, _ := e.sharesFlushed(); !shares {
		return empty
	}
	m, err := sparse.SharedRangesIn(e.ctx, e.src, e.dst.OS(), lo, hi)
	if err != nil {
		return empty
	}
	return m
}
