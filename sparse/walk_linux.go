package sparse

import (
	"io/fs"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

var errNoMoreData = unix.ENXIO

func seekData(fd int, off int64) (int64, error) { return seek(fd, off, unix.SEEK_DATA) }
func seekHole(fd int, off int64) (int64, error) { return seek(fd, off, unix.SEEK_HOLE) }

func seek(fd int, off int64, whence int) (int64, error) {
	for {
		n, err := unix.Seek(fd, off, whence)
		if err == unix.EINTR {
			continue
		}
		return n, err
	}
}

// isSeekUnsupported reports errnos that mean "this file cannot say where
// its holes are" rather than a failure.
func isSeekUnsupported(err error) bool {
	return err == unix.EINVAL || err == unix.EOPNOTSUPP || err == unix.ENOTSUP || err == unix.ENOSYS
}

// Stat returns what the package needs to know about f. For a block device
// the size comes from BLKGETSIZE64, since st_size is 0.
func Stat(f *os.File) (FileInfo, error) {
	var st unix.Stat_t
	var size uint64
	op := "stat"
	err := rawfd.Do(f, func(fd int) error {
		if err := unix.Fstat(fd, &st); err != nil {
			op = "fstat"
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFBLK {
			_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&size)))
			if e != 0 {
				op = "ioctl BLKGETSIZE64"
				return e
			}
		}
		return nil
	})
	if err != nil {
		return FileInfo{}, &fs.PathError{Op: op, Path: f.Name(), Err: err}
	}
	info := FileInfo{
		Size:       st.Size,
		Allocated:  st.Blocks * 512,
		Mode:       fileMode(st.Mode),
		Dev:        st.Dev,
		Ino:        st.Ino,
		ModTime:    time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
		ChangeTime: time.Unix(st.Ctim.Sec, st.Ctim.Nsec),
	}
	if st.Mode&unix.S_IFMT == unix.S_IFBLK {
		info.BlockDevice = true
		info.Size = int64(size)
	}
	return info, nil
}

func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
