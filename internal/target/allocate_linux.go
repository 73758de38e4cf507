package target

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// allocatesEagerly reports whether f is on ext4 (see AllocateAhead).
func allocatesEagerly(f *os.File) bool {
	var st unix.Statfs_t
	if rawfd.Do(f, func(fd int) error { return unix.Fstatfs(fd, &st) }) != nil {
		return false
	}
	return st.Type == unix.EXT4_SUPER_MAGIC
}

// allocate allocates [off, off+n) as unwritten blocks, leaving the size
// alone. Errors are ignored (AllocateAhead).
func (t *File) allocate(off, n int64) {
	_ = rawfd.Do(t.f, func(fd int) error { return unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, off, n) })
}
