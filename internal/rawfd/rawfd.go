package rawfd

import "syscall"

// Do runs fn with c's raw descriptor and returns fn's error, or the error
// of reaching the descriptor (a closed file's) without running fn. Errors are returned bare: callers add the op and path.
func Do(c syscall.Conn, fn func(fd int) error) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// Do2 runs fn with the raw descriptors of a and b, both held open for the
// call, as Do does for one.
func Do2(a, b syscall.Conn, fn func(afd, bfd int) error) error {
	return Do(a, func(afd int) error {
		return Do(b, func(bfd int) error { return fn(afd, bfd) })
	})
}

// Retry calls fn until it returns something other than EINTR, and returns
// that.
func Retry(fn func() error) error {
	for {
		if err := fn(); err != syscall.EINTR {
			return err
		}
	}
}
