package sparse

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// PunchHole makes [off, off+n) of f read as zeros without changing its size.
// It deallocates the range with fallocate(PUNCH_HOLE|KEEP_SIZE) where the
// filesystem or device can; where it cannot (EOPNOTSUPP, ENOSYS, or EINVAL
// for unaligned ranges on block devices) it writes zeros instead and reports
// punched=false, so callers can say so in their stats. Partial blocks at the
// edges are zeroed by the kernel, not freed.
func PunchHole(f *os.File, off, n int64) (punched bool, err error) {
	if n <= 0 {
		return true, nil
	}
	var errno error
	if err := rawfd.Do(f, func(fd int) error {
		errno = rawfd.Retry(func() error {
			return unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
		})
		return nil
	}); err != nil {
		return false, &fs.PathError{Op: "punch_hole", Path: f.Name(), Err: err}
	}
	switch errno {
	case nil:
		return true, nil
	case unix.EOPNOTSUPP, unix.ENOSYS, unix.EINVAL:
		return false, WriteZeros(f, off, n)
	}
	return false, &fs.PathError{Op: "punch_hole", Path: f.Name(), Err: errno}
}
