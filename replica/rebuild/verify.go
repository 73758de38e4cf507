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

// verifyCopy checks that dst reads as src. When both files map every
// extent to the same physical blocks of one device (a reflink copy, per
// FIEMAP) that is proof without reading; otherwise it compares byte for
// byte over the data of either (holes of both read as zeros, unread).
func verifyCopy(ctx context.Context, src, dst string, read *qos.Limiter) error {
	if ok, err := sameBlocks(ctx, src, dst); err != nil || ok {
		return err
	}
	sm, si, err := sparse.ReadMap(ctx, src)
	if err != nil {
		return err
	}
	dm, di, err := sparse.ReadMap(ctx, dst)
	if err != nil {
		return err
	}
	if si.Size != di.Size {
		return fmt.Errorf("%w: %s: size %d, source %s has %d", replica.ErrVerify, dst, di.Size, src, si.Size)
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
	a, b := make([]byte, 1<<20), make([]byte, 1<<20)
	for _, e := range sm.Union(dm).Extents() {
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
				return fmt.Errorf("%w: %s differs from %s in [%d, %d)", replica.ErrVerify, dst, src, off, off+n)
			}
			off += n
		}
	}
	return nil
}

// physExtent is a FIEMAP record reduced to what decides the content.
type physExtent struct {
	logical, physical, length int64
	unwritten                 bool
}

// physLayout returns f's extents, adjacent ones merged, or ok=false when
// a location is unknown or the data is not plainly stored.
func physLayout(ctx context.Context, f *os.File, size int64) (ext []physExtent, ok bool, err error) {
	const opaque = sparse.FiemapUnknown | sparse.FiemapDelalloc | sparse.FiemapEncoded | sparse.FiemapDataEncrypted |
		sparse.FiemapNotAligned | sparse.FiemapDataInline | sparse.FiemapDataTail
	ok = true
	err = sparse.Fiemap(ctx, f, 0, size, func(e sparse.FiemapExtent) error {
		if e.Flags&opaque != 0 || e.Physical == 0 {
			ok = false
			return errStopFiemap
		}
		x := physExtent{e.Logical, e.Physical, e.Length, e.Flags&sparse.FiemapUnwritten != 0}
		if n := len(ext); n > 0 {
			p := &ext[n-1]
			if p.logical+p.length == x.logical && p.physical+p.length == x.physical && p.unwritten == x.unwritten {
				p.length += x.length
				return nil
			}
		}
		ext = append(ext, x)
		return nil
	})
	if errors.Is(err, errStopFiemap) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, nil // no FIEMAP here: compare bytes
	}
	return ext, ok, nil
}

var errStopFiemap = errors.New("stop")

// sameBlocks reports whether src and dst are one size, on one device, and
// every extent of both lies on the same physical blocks.
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
	se, ok, err := physLayout(ctx, sf, si.Size)
	if err != nil || !ok || len(se) == 0 {
		return false, err
	}
	de, ok, err := physLayout(ctx, df, di.Size)
	if err != nil || !ok {
		return false, err
	}
	return slices.Equal(se, de), nil
}
