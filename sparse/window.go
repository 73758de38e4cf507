package sparse

import (
	"context"
	"errors"
	"os"
)

// errWindowFull stops a walk whose window is complete.
var errWindowFull = errors.New("window complete")

// Window walks the data extents in [lo, hi), clipped to it, and stops
// after limit of them (limit > 0): a caller that plans a file a window at a
// time holds limit extents, whatever the file's count. It returns the
// extents and the window's end: hi, or the end of the limit-th extent when
// more may follow (the next window starts there).
func (w *Walker) Window(ctx context.Context, lo, hi int64, limit int) ([]Extent, int64, error) {
	var ext []Extent
	end := min(hi, w.info.Size)
	err := w.WalkFrom(ctx, lo, func(e Extent) error {
		if e.Off >= end {
			return errWindowFull
		}
		e.Len = min(e.Len, end-e.Off)
		ext = append(ext, e)
		if len(ext) >= limit {
			end = e.End()
			return errWindowFull
		}
		return nil
	})
	if err != nil && !errors.Is(err, errWindowFull) {
		return nil, 0, err
	}
	return ext, max(end, lo), nil
}

// Tally walks the whole file once, holding nothing, and returns its data
// bytes and whether its allocation (FileInfo.Allocated) exceeds that data
// in whole pages: whether HiddenAllocation may find anything, so that a
// caller walking in windows asks HiddenAllocationIn only then.
func (w *Walker) Tally(ctx context.Context) (data int64, mayHide bool, err error) {
	var pc pageCount
	err = w.Walk(ctx, func(e Extent) error {
		data += e.Len
		pc.add(e)
		return nil
	})
	alloc := w.info.Allocated
	return data, alloc > 0 && alloc > pc.n, err
}

// pageCount counts the whole pages extents cover, in increasing order, a
// page shared by two extents once, the last partial page of the file
// included.
type pageCount struct {
	n, end int64
}

func (c *pageCount) add(e Extent) {
	page := int64(max(os.Getpagesize(), 4096))
	a, b := max(e.Off/page*page, c.end), (e.End()+page-1)/page*page
	if b > a {
		c.n, c.end = c.n+b-a, b
	}
}
