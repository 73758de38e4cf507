package disks

import (
	"errors"
	"fmt"
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

// flockDir takes an exclusive, non-blocking flock on dir: the lock
// replica.Open and replica.Rebuild take on a replica directory, so holding
// it keeps every writer out (their Open fails with replica.ErrBusy), and a
// writer holding it makes flockDir fail with ErrBusy. Closing the returned
// file releases it; so does the death of the process.
func flockDir(dir string) (*os.File, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	rc, err := d.SyscallConn()
	if err != nil {
		d.Close()
		return nil, err
	}
	var errno error
	if err := rc.Control(func(fd uintptr) {
		for {
			if errno = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB); errno != unix.EINTR {
				return
			}
		}
	}); err != nil {
		errno = err
	}
	if errno != nil {
		d.Close()
		if errors.Is(errno, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", dir, ErrBusy)
		}
		return nil, &fs.PathError{Op: "flock", Path: dir, Err: errno}
	}
	return d, nil
}
