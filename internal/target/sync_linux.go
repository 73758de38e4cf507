package target

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// Fdatasync flushes f's data and the metadata needed to read it back,
// retrying on EINTR. It returns the bare error; callers add the op and path.
func Fdatasync(f *os.File) error {
	return rawfd.Do(f, func(fd int) error {
		return rawfd.Retry(func() error { return unix.Fdatasync(fd) })
	})
}
