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

// startWriteback starts the writeback of every dirty page of the file
// (sync_file_range SYNC_FILE_RANGE_WRITE over the whole file) without
// waiting for it. Errors are ignored: it is a head start, and the next
// fdatasync reports them. A block device too: its page cache is the same.
func (t *File) startWriteback() {
	if _, ok := t.faults.fire(OpWriteback, t.path); ok {
		return
	}
	_ = rawfd.Do(t.f, func(fd int) error { return unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE) })
}
