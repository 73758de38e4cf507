package rebuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/sparsesync/sparsesync/qos"
	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/sparse"
)

// verifyWindow is how many data extents of each file verifyCopy and
// sameBlocks hold at a time: their memory is fixed, whatever the extent
// count of the image.
const verifyWindow = 4096

// verifyCopy checks that dst reads as src. When both files map every
// extent to the same physical blocks of one device (a reflink copy, per
// FIEMAP) that is proof without reading; otherwise it compares byte for
// byte over the data of either (holes of both read as zeros, unread). Both
// are done a window of extents at a time.
func verifyCopy(ctx context.Context, src, dst string, read *qos.Limiter) error {
	if ok, err := sameBlocks(ctx, src, dst); err != nil || ok {
		return err
	}
	sf, err := os.Open(src)
	if err != nil {
		return err
	}
	defer sf.Close()
	df, err := os.Open(dst)
	if err != nil {
		return err
	}
	defer df.Close()
	sw, err := sparse.NewWalker(sf)
	if err != nil {
		return err
	}
	dw, err := sparse.NewWalker(df)
	if err != nil {
		return err
	}
	size := sw.Size()
	if dw.Size() != size {
		return fmt.Errorf("%w: %s: size %d, source %s has %d", replica.ErrVerify, dst, dw.Size(), src, size)
	}
	a, b := make([]byte, 1<<20), make([]byte, 1<<20)
	for lo := int64(0); lo < size; {
		data, hi, err := unionWindow(ctx, sw, dw, lo, size)
		if err != nil {
			return err
		}
		for _, e := range data {
			if err := compareRange(ctx, sf, df, e, a, b, read); err != nil {
				return err
			}
		}
		lo = hi
	}
	return nil
}

// unionWindow returns the data of either walker from lo on, at most
// verifyWindow extents of each, and where the window ends.
func unionWindow(ctx context.Context, sw, dw *sparse.Walker, lo, size int64) ([]sparse.Extent, int64, error) {
	se, hi, err := sw.Window(ctx, lo, size, verifyWindow)
	if err != nil {
		return nil, 0, err
	}
	de, hi, err := dw.Window(ctx, lo, hi, verifyWindow) // ends sooner where dst is denser
	if err != nil {
		return nil, 0, err
	}
	se = clipExtents(se, hi)
	sm, err := sparse.NewMap(size, se...)
	if err != nil {
		return nil, 0, err
	}
	dm, err := sparse.NewMap(size, de...)
	if err != nil {
		return nil, 0, err
	}
	return sm.Union(dm).Extents(), hi, nil
}

// clipExtents cuts ext (in order) at hi.
func clipExtents(ext []sparse.Extent, hi int64) []sparse.Extent {
	for i, e := range ext {
		if e.End() > hi {
			if e.Off >= hi {
				return ext[:i]
			}
			ext[i].Len = hi - e.Off
			return ext[:i+1]
		}
	}
	return ext
}

// compareRange reads e from both files, a megabyte at a time, paced by read.
func compareRange(ctx context.Context, sf, df *os.File, e sparse.Extent, a, b []byte, read *qos.Limiter) error {
	for off := e.Off; off < e.End(); {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(int64(len(a)), e.End()-off)
		if p := read.Piece(); p > 0 {
			n = min(n, max(p/2, 4096)) // both reads in one piece: a steady rate
		}
		if err := read.Wait(ctx, 2*n); err != nil {
			return err
		}
		if _, err := sf.ReadAt(a[:n], off); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if _, err := df.ReadAt(b[:n], off); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if !bytes.Equal(a[:n], b[:n]) {
			return fmt.Errorf("%w: %s differs from %s in [%d, %d)", replica.ErrVerify, df.Name(), sf.Name(), off, off+n)
		}
		off += n
	}
	return nil
}

// physExtent is a FIEMAP record reduced to what decides the content.
type physExtent struct {
	logical, physical, length int64
	unwritten                 bool
}

// physWindow returns f's extents in [lo, hi), clipped to it and adjacent
// ones merged, at most limit of them, and where the window ends: hi, or
// where the extent after the limit-th starts. ok is false when a location
// is unknown or the data is not plainly stored.
func physWindow(ctx context.Context, f *os.File, lo, hi int64, limit int) (ext []physExtent, end int64, ok bool, err error) {
	const opaque = sparse.FiemapUnknown | sparse.FiemapDelalloc | sparse.FiemapEncoded | sparse.FiemapDataEncrypted |
		sparse.FiemapNotAligned | sparse.FiemapDataInline | sparse.FiemapDataTail
	ok, end = true, hi
	err = sparse.Fiemap(ctx, f, lo, hi-lo, func(e sparse.FiemapExtent) error {
		if e.Flags&opaque != 0 || e.Physical == 0 {
			ok = false
			return errStopFiemap
		}
		x := physExtent{e.Logical, e.Physical, e.Length, e.Flags&sparse.FiemapUnwritten != 0}
		if x.logical < lo {
			d := lo - x.logical
			x.logical, x.physical, x.length = lo, x.physical+d, x.length-d
		}
		x.length = min(x.length, hi-x.logical)
		if x.length <= 0 {
			return nil
		}
		if n := len(ext); n > 0 {
			p := &ext[n-1]
			if p.logical+p.length == x.logical && p.physical+p.length == x.physical && p.unwritten == x.unwritten {
				p.length += x.length
				return nil
			}
		}
		if len(ext) == limit {
			end = x.logical
			return errWindowFull
		}
		ext = append(ext, x)
		return nil
	})
	switch {
	case errors.Is(err, errWindowFull):
		return ext, end, true, nil
	case errors.Is(err, errStopFiemap):
		return nil, 0, false, nil
	case err != nil:
		return nil, 0, false, nil // no FIEMAP here: compare bytes
	}
	return ext, end, ok, nil
}

var (
	errStopFiemap = errors.New("stop")
	errWindowFull = errors.New("window full")
)

// sameBlocks reports whether src and dst are one size, on one device, and
// every extent of both lies on the same physical blocks. It compares their
// FIEMAP layouts a window of verifyWindow extents at a time.
func sameBlocks(ctx context.Context, src, dst string) (bool, error) {
	sf, err := os.Open(src)
	if err != nil {
		return false, err
	}
	defer sf.Close()
	df, err := os.Open(dst)
	if err != nil {
		return false, err
	}
	defer df.Close()
	si, err := sparse.Stat(sf)
	if err != nil {
		return false, err
	}
	di, err := sparse.Stat(df)
	if err != nil {
		return false, err
	}
	if si.Dev != di.Dev || si.Size != di.Size || si.Size == 0 {
		return false, nil
	}
	extents := 0
	for lo := int64(0); lo < si.Size; {
		se, end, ok, err := physWindow(ctx, sf, lo, si.Size, verifyWindow)
		if err != nil || !ok {
			return false, err
		}
		// A destination denser than the source fills its window first and
		// cannot equal se.
		de, _, ok, err := physWindow(ctx, df, lo, end, verifyWindow)
		if err != nil || !ok || !slices.Equal(se, de) {
			return false, err
		}
		extents += len(se)
		lo = end
	}
	return extents > 0, nil
}
