package target

import (
	"os"

	"golang.org/x/sys/unix"
)

// Fdatasync flushes f's data and the metadata needed to read it back,
// retrying on EINTR. It returns the bare error; callers add the op and path.
func Fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = unix.Fdatasync(int(fd)); serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}
