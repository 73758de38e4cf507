package replica

import (
	"errors"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// openImage opens an image file, with O_DIRECT where the filesystem allows
// it (direct reports whether it did).
func openImage(path string, flag int, directIO bool) (f *os.File, direct bool, err error) {
	if directIO && oDirect != 0 {
		f, err = os.OpenFile(path, flag|oDirect, 0o600)
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, unix.EINVAL) {
			return nil, false, err
		}
	}
	f, err = os.OpenFile(path, flag, 0o600)
	return f, false, err
}

// seekLayer returns the next data (whence SEEK_DATA) or hole (SEEK_HOLE)
// offset of f at or after off; io.EOF when there is no more data.
func seekLayer(f *os.File, off int64, whence int) (int64, error) {
	var n int64
	var errno error
	if err := rawfd.Do(f, func(fd int) error {
		errno = rawfd.Retry(func() (err error) {
			n, err = unix.Seek(fd, off, whence)
			return err
		})
		return nil
	}); err != nil {
		return 0, err
	}
	if errno == unix.ENXIO {
		return 0, io.EOF
	}
	if errno != nil {
		op := "seek_data"
		if whence == unix.SEEK_HOLE {
			op = "seek_hole"
		}
		return 0, &fs.PathError{Op: op, Path: f.Name(), Err: errno}
	}
	return n, nil
}

// resolveChain splits [off, end) (block aligned) by the layer that provides
// each block: layers[0] is the head, then its parents. A layer owns a 4 KiB
// block when any byte of it is allocated there (Longhorn's location map has
// the same granularity). fn gets base+layer index, or -1 for ranges no layer
// holds (they read as zeros). Ranges come in ascending order.
//
// This is the merge a chain reader (export, rebuild) needs as well: the
// ranges with a layer >= 0 are the data extents of the volume.
func resolveChain(layers []*os.File, base int, off, end int64, fn func(layer int, off, n int64) error) error {
	if off >= end {
		return nil
	}
	if len(layers) == 0 {
		return fn(-1, off, end-off)
	}
	for pos := off; pos < end; {
		d, err := seekLayer(layers[0], pos, unix.SEEK_DATA)
		if err == io.EOF {
			d = end
		} else if err != nil {
			return err
		}
		d = min(max(roundDown(d), pos), end)
		if d > pos {
			if err := resolveChain(layers[1:], base+1, pos, d, fn); err != nil {
				return err
			}
		}
		if d >= end {
			return nil
		}
		h, err := seekLayer(layers[0], d, unix.SEEK_HOLE)
		if err == io.EOF {
			h = end
		} else if err != nil {
			return err
		}
		h = min(max(roundUp(h), d+BlockSize), end)
		if err := fn(base, d, h-d); err != nil {
			return err
		}
		pos = h
	}
	return nil
}
