package tcpsync

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// uncachedReader reads a file bypassing the page cache: through a second
// descriptor opened with O_DIRECT (via /proc/self/fd, so it is the same
// inode even unlinked or hard to name), or, where O_DIRECT is refused,
// through the file itself after POSIX_FADV_DONTNEED dropped its clean
// pages (the caller has just made them clean with fdatasync).
type uncachedReader struct {
	f      *os.File // what is read
	direct bool     // f is an O_DIRECT descriptor this reader owns
	buf    []byte   // aligned to 4 KiB
}

const directAlign = 4096

func newUncachedReader(f *os.File) (*uncachedReader, error) {
	raw := make([]byte, readBackSize+directAlign)
	shift := int((directAlign - uintptr(unsafe.Pointer(&raw[0]))%directAlign) % directAlign)
	r := &uncachedReader{f: f, buf: raw[shift : shift+readBackSize]}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var oerr error
	if err := rc.Control(func(s uintptr) {
		for {
			fd, oerr = unix.Open("/proc/self/fd/"+strconv.Itoa(int(s)), unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
			if oerr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return nil, err
	}
	if oerr == nil {
		r.f, r.direct = os.NewFile(uintptr(fd), f.Name()), true
		return r, nil
	}
	// No O_DIRECT here (or no /proc): drop the cached pages instead.
	var ferr error
	if err := rc.Control(func(s uintptr) { ferr = unix.Fadvise(int(s), 0, 0, unix.FADV_DONTNEED) }); err != nil {
		return nil, err
	}
	if ferr != nil {
		return nil, &os.SyscallError{Syscall: "fadvise", Err: ferr}
	}
	return r, nil
}

// read returns n bytes at off (off aligned to 4 KiB, n at most
// readBackSize); the file must hold them (a short read is an error).
func (r *uncachedReader) read(off, n int64) ([]byte, error) {
	want := n
	if r.direct {
		want = (n + directAlign - 1) / directAlign * directAlign
	}
	got, err := r.f.ReadAt(r.buf[:want], off)
	if int64(got) >= n {
		return r.buf[:n], nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = fmt.Errorf("short read of %d bytes at %d (got %d)", n, off, got)
	}
	return nil, err
}

func (r *uncachedReader) close() {
	if r.direct {
		r.f.Close()
	}
}
