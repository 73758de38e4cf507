package sparse

import (
	"io/fs"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// setMtime sets f's mtime to t and leaves its atime: utimensat on the
// descriptor (a NULL path, as futimens), which needs the file's owner (or
// CAP_FOWNER), not write access.
func setMtime(f *os.File, t time.Time) error {
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(t.UnixNano())}
	var errno error
	if err := rawfd.Do(f, func(fd int) error {
		if _, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0); e != 0 {
			errno = e
		}
		return nil
	}); err != nil {
		return &fs.PathError{Op: "futimens", Path: f.Name(), Err: err}
	}
	if errno != nil {
		return &fs.PathError{Op: "futimens", Path: f.Name(), Err: errno}
	}
	return nil
}
