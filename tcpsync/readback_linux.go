package tcpsync

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// dropCache drops f's clean pages from the page cache
// (POSIX_FADV_DONTNEED), so that the next reads come from storage.
func dropCache(f *os.File) error {
	return rawfd.Do(f, func(fd int) error {
		return os.NewSyscallError("fadvise", unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED))
	})
}
