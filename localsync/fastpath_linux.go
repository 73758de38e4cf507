package localsync

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// oTmpfile opens an unnamed temporary file in a directory.
const oTmpfile = unix.O_TMPFILE

// adviseSequential asks for aggressive readahead on f (as cp does), with
// length 0 so that no filesystem reads the whole file at once. Errors are
// ignored: it is only a hint.
func adviseSequential(f *os.File) {
	_ = rawfd.Do(f, func(fd int) error { return unix.Fadvise(fd, 0, 0, unix.FADV_SEQUENTIAL) })
}
