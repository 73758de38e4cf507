package disks

import (
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// statfs returns the filesystem's size and the bytes available to an
// unprivileged writer, as Longhorn's disk monitor reads them.
func statfs(path string) (maxBytes, avail int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil
}

// device returns the device number of the filesystem path is on.
func device(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return st.Dev, nil
}

// allocated returns the bytes a file occupies (st_blocks × 512).
func allocated(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}
