package tcpsync

import (
	"os"

	"golang.org/x/sys/unix"
)

// dropCache drops f's clean pages from the page cache
// (POSIX_FADV_DONTNEED), so that the next reads come from storage.
func dropCache(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(s uintptr) { ferr = unix.Fadvise(int(s), 0, 0, unix.FADV_DONTNEED) }); err != nil {
		return err
	}
	if ferr != nil {
		return &os.SyscallError{Syscall: "fadvise", Err: ferr}
	}
	return nil
}
