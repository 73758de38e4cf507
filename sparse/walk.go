package sparse

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// checkEvery is how many extents the walker yields between ctx checks.
const checkEvery = 4096

// flipStep is how far the walker treats a range as data when SEEK_DATA and
// SEEK_HOLE disagree because the file changed between the two calls.
const flipStep = 4096

// FileInfo is what the package needs to know about an open file.
type FileInfo struct {
	// Size is st_size for regular files and BLKGETSIZE64 for block devices.
	Size int64
	// Allocated is st_blocks*512: the bytes the filesystem has allocated.
	Allocated int64
	// BlockDevice reports whether the file is a block device.
	BlockDevice bool
	// Mode is the file's type and permission bits.
	Mode fs.FileMode
	// Dev and Ino identify the file (same file, hard links).
	Dev, Ino uint64
	// ModTime and ChangeTime are st_mtime and st_ctime.
	ModTime, ChangeTime time.Time
}

// Walker finds the data extents of an open file. It is not safe for
// concurrent use; walking moves the file's shared offset (lseek), so do not
// read the file with Read/Write (ReadAt/WriteAt are unaffected) while a walk
// runs.
type Walker struct {
	f          *os.File
	info       FileInfo
	holesKnown bool
}

// NewWalker stats f and returns a walker over its data. It refuses files that
// are neither regular files nor block devices (directories, pipes, sockets,
// character devices), with a *fs.PathError naming the file.
func NewWalker(f *os.File) (*Walker, error) {
	info, err := Stat(f)
	if err != nil {
		return nil, err
	}
	switch {
	case info.Mode.IsDir():
		return nil, &fs.PathError{Op: "walk", Path: f.Name(), Err: syscall.EISDIR}
	case !info.Mode.IsRegular() && !info.BlockDevice:
		return nil, &fs.PathError{Op: "walk", Path: f.Name(), Err: fmt.Errorf("%w (%s)", ErrNotRegular, TypeName(info.Mode))}
	}
	if info.Mode.IsRegular() && info.Size == 0 {
		// A file of size 0 that reads data is a pseudo-file (/proc, /sys):
		// its size says nothing of its content, and a copy would be an
		// empty file reported as a success.
		var b [1]byte
		if n, _ := f.ReadAt(b[:], 0); n > 0 {
			return nil, &fs.PathError{Op: "walk", Path: f.Name(), Err: fmt.Errorf("%w (size 0 but it reads data: a pseudo-file such as those under /proc or /sys)", ErrNotRegular)}
		}
	}
	return &Walker{f: f, info: info, holesKnown: true}, nil
}

// Info returns what NewWalker found when it stat'ed the file.
func (w *Walker) Info() FileInfo { return w.info }

// Size returns the size the walk covers (fixed when the walker was made).
func (w *Walker) Size() int64 { return w.info.Size }

// HolesKnown reports whether the last walk got its answer from the
// filesystem. It is false when the filesystem could not say where the holes
// are (block devices, procfs, some network filesystems) and the walk reported
// the whole file as data; callers may then look for zeros with IsZero.
func (w *Walker) HolesKnown() bool { return w.holesKnown }

// Walk calls fn for every data extent in increasing order. Extents never
// overlap or touch and always lie within Size, even if the file grows,
// shrinks or is punched during the walk: the walk only moves forward and
// always ends. It allocates nothing per extent and checks ctx every few
// thousand extents. An error from fn stops the walk and is returned as is.
func (w *Walker) Walk(ctx context.Context, fn func(Extent) error) error {
	return w.WalkFrom(ctx, 0, fn)
}

// WalkFrom is Walk from off on: fn sees the data extents that end after
// off, the first one clipped to start there. A caller that holds a window
// of the map at a time walks from each window's end; the walk costs what
// lies after off, not what lies before it.
func (w *Walker) WalkFrom(ctx context.Context, off int64, fn func(Extent) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.holesKnown = true
	if w.info.Size == 0 || off >= w.info.Size {
		return nil
	}
	off = max(off, 0)
	var walkErr error
	if err := rawfd.Do(w.f, func(fd int) error {
		walkErr = w.walkFd(ctx, fd, off, fn)
		return nil
	}); err != nil {
		return &fs.PathError{Op: "walk", Path: w.f.Name(), Err: err}
	}
	return walkErr
}

// walkFd is the portable loop over the platform's seekData/seekHole.
func (w *Walker) walkFd(ctx context.Context, fd int, from int64, fn func(Extent) error) error {
	size := w.info.Size
	var pending Extent
	pos := from
	for n := 1; pos < size; n++ {
		d, err := seekData(fd, pos)
		if err != nil {
			if err == errNoMoreData {
				break
			}
			if pos == from && isSeekUnsupported(err) {
				w.holesKnown = false
				return fn(Extent{from, size - from})
			}
			return &fs.PathError{Op: "seek_data", Path: w.f.Name(), Err: err}
		}
		d = max(d, pos)
		if d >= size {
			break
		}
		h, err := seekHole(fd, d)
		if err != nil {
			if err == errNoMoreData {
				break // the file shrank under us
			}
			return &fs.PathError{Op: "seek_hole", Path: w.f.Name(), Err: err}
		}
		h = min(h, size)
		if h <= d {
			h = min(d+flipStep, size)
		}
		if pending.Len > 0 && pending.End() == d {
			pending.Len = h - pending.Off
		} else {
			if pending.Len > 0 {
				if err := fn(pending); err != nil {
					return err
				}
			}
			pending = Extent{d, h - d}
		}
		pos = h
		if n%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	if pending.Len > 0 {
		return fn(pending)
	}
	return nil
}

// Map walks the file and returns its data map.
func (w *Walker) Map(ctx context.Context) (Map, error) {
	m := Map{size: w.info.Size}
	err := w.Walk(ctx, func(e Extent) error {
		m.ext = append(m.ext, e)
		return nil
	})
	if err != nil {
		return Map{}, err
	}
	return m, nil
}

// DataMap walks the file and returns its data as every command counts it:
// Map without the ranges that read as zeros without being stored
// (UnstoredZeros: unwritten or unmapped in FIEMAP, no dirty page, cached
// pages all zeros). SEEK_DATA calls unwritten (preallocated) space data on
// ext4 and XFS once zero pages are cached over it, so Map's total depends
// on the page cache; DataMap's does not: an unwritten extent that was never
// written is a hole, read or not. A block device, or a file whose holes
// the filesystem cannot tell, is all Map.
func (w *Walker) DataMap(ctx context.Context) (Map, error) {
	m, err := w.Map(ctx)
	if err != nil || !w.holesKnown || w.info.BlockDevice || m.Len() == 0 {
		return m, err
	}
	if z := UnstoredZeros(ctx, w.f, m, nil); z.Len() > 0 {
		m = m.Difference(z)
	}
	return m, ctx.Err()
}

// ReadMap opens path read-only and returns its data map and what was known
// about the file.
func ReadMap(ctx context.Context, path string) (Map, FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return Map{}, FileInfo{}, err
	}
	defer f.Close()
	w, err := NewWalker(f)
	if err != nil {
		return Map{}, FileInfo{}, err
	}
	m, err := w.Map(ctx)
	return m, w.Info(), err
}
