package sparse

import (
	"context"
	"os"
)

// HiddenAllocation returns the ranges of f within [0, data.Size()) that hold
// allocated blocks although a walk found no data there: unwritten
// preallocations (fallocate(2) on XFS, ext4 or btrfs, fallocated pages on
// tmpfs) read as zeros and SEEK_DATA skips them, yet they take space. A sync
// that punches only the destination's data where the source has holes leaves
// them allocated; a destination that is exact to the last hole has them
// punched too.
//
// data is f's data map from a walk and allocated the bytes f had allocated
// then (FileInfo.Allocated, st_blocks*512). When allocated does not exceed
// data in whole pages, nothing can be hidden and no system call is made: the
// common case costs nothing. Otherwise FIEMAP says where the blocks are. On
// tmpfs, which has no FIEMAP, fallocated pages sit in the page cache without
// being data, so cachestat(2) over the holes finds them (a hole of tmpfs
// that is only read caches nothing). Where neither can say, nothing is
// returned: a guess would punch on every run and never settle.
func HiddenAllocation(ctx context.Context, f *os.File, data Map, allocated int64) (Map, error) {
	if data.Size() == 0 || allocated <= pagesOf(data) {
		none, _ := NewMap(data.Size())
		return none, nil
	}
	return HiddenAllocationIn(ctx, f, data, 0)
}

// HiddenAllocationIn is HiddenAllocation over [lo, data.Size()) only, for
// a caller that holds f's map a window at a time: data holds f's data in
// that range (anything before lo is not looked at), and the caller has
// found that something may be hidden (f's allocation exceeds its data in
// whole pages; see HiddenAllocation), so the system calls are made.
func HiddenAllocationIn(ctx context.Context, f *os.File, data Map, lo int64) (Map, error) {
	none, _ := NewMap(data.Size())
	lo = max(lo, 0)
	if lo >= data.Size() {
		return none, nil
	}
	var recs []Extent
	err := Fiemap(ctx, f, lo, data.Size()-lo, func(x FiemapExtent) error {
		e := x.Extent()
		if e.End() > lo && e.Off < lo {
			e = Extent{Off: lo, Len: e.End() - lo}
		}
		if e.Off >= lo && e.Off < data.Size() {
			e.Len = min(e.Len, data.Size()-e.Off)
			recs = append(recs, e)
		}
		return nil
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return none, ctx.Err()
	case err != nil:
		return cachedHoles(ctx, f, data, lo)
	}
	mapped, err := NewMap(data.Size(), recs...)
	if err != nil {
		return none, nil // records past the size say nothing reliable
	}
	return mapped.Difference(data), nil
}

// cachedHoles finds the pages of data's holes from on that are in f's
// page cache (cachestat), bisecting each hole that has any down to whole
// pages.
func cachedHoles(ctx context.Context, f *os.File, data Map, from int64) (Map, error) {
	none, _ := NewMap(data.Size())
	page := int64(os.Getpagesize())
	var found []Extent
	var locate func(off, n int64) error
	locate = func(off, n int64) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		c, err := cachedPages(f, off, n)
		switch {
		case err != nil:
			return err
		case c == 0:
		case c*page >= n || n <= page:
			found = append(found, Extent{Off: off, Len: n})
		default:
			half := (n/2 + page - 1) / page * page
			if err := locate(off, half); err != nil {
				return err
			}
			return locate(off+half, n-half)
		}
		return nil
	}
	for _, h := range data.Holes().Extents() {
		// Whole pages only: a page that holds data is data's.
		lo, hi := (max(h.Off, from)+page-1)/page*page, h.End()/page*page
		if h.End() == data.Size() {
			hi = h.End()
		}
		if hi <= lo {
			continue
		}
		if err := locate(lo, hi-lo); err != nil {
			if ctx.Err() != nil {
				return none, ctx.Err()
			}
			return none, nil // no cachestat here: nothing can be located
		}
	}
	m, err := NewMap(data.Size(), found...)
	if err != nil {
		return none, nil
	}
	return m, nil
}

// pagesOf is what data takes in whole pages, the last partial page of the
// file included (RoundOut stops at the size; the allocation does not).
func pagesOf(data Map) int64 {
	var c pageCount
	for _, e := range data.Extents() {
		c.add(e)
	}
	return c.n
}
