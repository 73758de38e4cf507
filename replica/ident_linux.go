package replica

import (
	"os"

	"golang.org/x/sys/unix"
)

// identOf returns the inode number and birth time of the file at path
// (statx; btime is 0 where the filesystem does not record it).
func identOf(path string) (fileIdent, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_BTIME, &st); err != nil {
		return fileIdent{}, &os.PathError{Op: "statx", Path: path, Err: err}
	}
	id := fileIdent{ino: st.Ino}
	if st.Mask&unix.STATX_BTIME != 0 {
		id.btime = st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
	}
	return id, nil
}
