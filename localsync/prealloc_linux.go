package localsync

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// preallocSmall is the longest source extent whose destination blocks a
// copy allocates (fallocate) before writing them, where allocatesEagerly
// says it pays.
const preallocSmall = 1 << 20

// allocatesEagerly reports whether f is on ext4, where allocating a small
// extent's blocks with fallocate before writing them costs less than
// leaving them to delayed allocation. ext4 allocates a delayed write at
// writeback, and normalises each small request to a window of up to 8 MiB
// aligned at its offset (ext4_mb_normalize_request): in a file of small
// extents far apart, each window reserves far more than it uses, the free
// space fragments, and later requests scan group after group for a window
// (ext4_mb_complex_scan_group: most of the system time of a copy of
// 100,000 extents of 4 KiB). fallocate asks for exactly the extent
// (EXT4_GET_BLOCKS_NO_NORMALIZE). XFS and btrfs allocate delayed writes
// well and would only pay for the unwritten extents; tmpfs would allocate
// twice.
func allocatesEagerly(f *os.File) bool {
	var st unix.Statfs_t
	if rawfd.Do(f, func(fd int) error { return unix.Fstatfs(fd, &st) }) != nil {
		return false
	}
	return st.Type == unix.EXT4_SUPER_MAGIC
}

// preallocate allocates [off, off+n) of f as unwritten blocks, leaving its
// size alone. Errors are ignored: it is only a placement hint, and the
// write that follows reports real trouble (ENOSPC). It is a variable so
// that tests can see it run.
var preallocate = func(f *os.File, off, n int64) {
	_ = rawfd.Do(f, func(fd int) error { return unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, off, n) })
}
