package sparse

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// fsIocFiemap is FS_IOC_FIEMAP, _IOWR('f', 11, struct fiemap).
const fsIocFiemap = 0xC020660B

// fiemapBatch is how many records one ioctl asks for.
const fiemapBatch = 512

type fiemapHeader struct {
	start         uint64
	length        uint64
	flags         uint32
	mappedExtents uint32
	extentCount   uint32
	reserved      uint32
}

type fiemapRecord struct {
	logical    uint64
	physical   uint64
	length     uint64
	reserved64 [2]uint64
	flags      uint32
	reserved   [3]uint32
}

type fiemapRequest struct {
	hdr fiemapHeader
	ext [fiemapBatch]fiemapRecord
}

// Fiemap calls fn for every FIEMAP record of f that overlaps [start,
// start+length), in order. It complements the SEEK_DATA walker where per-extent
// flags matter (shared, unwritten, delalloc); it does not sync the file first,
// so dirty data comes back as Delalloc|Unknown and must be treated as data.
// Filesystems without FIEMAP (tmpfs) give an error matching
// errors.ErrUnsupported.
func Fiemap(ctx context.Context, f *os.File, start, length int64, fn func(FiemapExtent) error) error {
	if start < 0 || length < 0 {
		return &fs.PathError{Op: "fiemap", Path: f.Name(), Err: fmt.Errorf("negative range %d+%d: %w", start, length, unix.EINVAL)}
	}
	req := new(fiemapRequest)
	end := uint64(start) + uint64(length)
	pos := uint64(start)
	for pos < end {
		if err := ctx.Err(); err != nil {
			return err
		}
		req.hdr = fiemapHeader{start: pos, length: end - pos, extentCount: fiemapBatch}
		var errno unix.Errno
		if err := rawfd.Do(f, func(fd int) error {
			for {
				_, _, errno = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fsIocFiemap, uintptr(unsafe.Pointer(req)))
				if errno != unix.EINTR {
					return nil
				}
			}
		}); err != nil {
			return &fs.PathError{Op: "fiemap", Path: f.Name(), Err: err}
		}
		if errno != 0 {
			err := error(errno)
			if errno == unix.EOPNOTSUPP || errno == unix.ENOTTY {
				err = fmt.Errorf("%w (%v)", errors.ErrUnsupported, errno)
			}
			return &fs.PathError{Op: "fiemap", Path: f.Name(), Err: err}
		}
		n := min(int(req.hdr.mappedExtents), fiemapBatch)
		if n == 0 {
			return nil
		}
		last := false
		for _, r := range req.ext[:n] {
			e := FiemapExtent{Logical: int64(r.logical), Physical: int64(r.physical), Length: int64(r.length), Flags: FiemapFlags(r.flags)}
			if err := fn(e); err != nil {
				return err
			}
			last = last || e.Flags&FiemapLast != 0
		}
		r := req.ext[n-1]
		next := r.logical + r.length
		if last || next <= pos {
			return nil
		}
		pos = next
	}
	return nil
}
