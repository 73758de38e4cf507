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
// data in whole pages, nothing can be hidden and no system call
// is made: the common case costs nothing. Otherwise FIEMAP says where the
// blocks are; where it cannot (tmpfs, other systems, any FIEMAP error but a
// cancelled ctx) every hole of data is returned, as possibly allocated:
// punching a hole is harmless, leaving an allocation is not exact.
func HiddenAllocation(ctx context.Context, f *os.File, data Map, allocated int64) (Map, error) {
	none, _ := NewMap(data.Size())
	if data.Size() == 0 || allocated <= pagesOf(data) {
		return none, nil
	}
	var recs []Extent
	err := Fiemap(ctx, f, 0, data.Size(), func(x FiemapExtent) error {
		e := x.Extent()
		if e.Off < data.Size() {
			e.Len = min(e.Len, data.Size()-e.Off)
			recs = append(recs, e)
		}
		return nil
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return none, ctx.Err()
	case err != nil:
		return data.Holes(), nil
	}
	mapped, err := NewMap(data.Size(), recs...)
	if err != nil {
		// Records that overlap past the size or are malformed say
		// nothing reliable: treat every hole as possibly allocated.
		return data.Holes(), nil
	}
	return mapped.Difference(data), nil
}

// pagesOf is what data takes in whole pages, the last partial page of the
// file included (RoundOut stops at the size; the allocation does not).
func pagesOf(data Map) int64 {
	page := int64(max(os.Getpagesize(), 4096))
	var n int64
	for _, e := range data.RoundOut(page).Extents() {
		n += (e.Len + page - 1) / page * page
	}
	return n
}
