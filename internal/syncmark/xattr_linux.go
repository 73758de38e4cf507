package syncmark

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

var errUnsupported = errors.ErrUnsupported

// The extended attribute calls. Tests swap them (through the Hook
// pointers) to play a filesystem without user extended attributes; nothing
// else assigns them.
var (
	fgetxattr    = unix.Fgetxattr
	fsetxattr    = unix.Fsetxattr
	fremovexattr = unix.Fremovexattr
)

// Pointers to the hooks, for tests of this module only (the
// os/export_linux_test.go pattern across a package boundary, as
// internal/kcopy). A test swaps one and restores it in t.Cleanup; no test
// that does may run in parallel.
var (
	FgetxattrHook = &fgetxattr
	FsetxattrHook = &fsetxattr
)

func control(f *os.File, op string, fn func(fd int) error) error {
	if err := rawfd.Do(f, fn); err != nil {
		return &fs.PathError{Op: op, Path: f.Name(), Err: err}
	}
	return nil
}

func getxattr(f *os.File, name string, max int) ([]byte, error) {
	b := make([]byte, max)
	var n int
	err := control(f, "getxattr", func(fd int) (err error) {
		n, err = fgetxattr(fd, name, b)
		return err
	})
	if err != nil {
		return nil, err
	}
	return b[:n], nil
}

func setxattr(f *os.File, name string, v []byte) error {
	return control(f, "setxattr", func(fd int) error { return fsetxattr(fd, name, v, 0) })
}

func removexattr(f *os.File, name string) error {
	err := control(f, "removexattr", func(fd int) error { return fremovexattr(fd, name) })
	if errors.Is(err, unix.ENODATA) || errors.Is(err, errors.ErrUnsupported) || errors.Is(err, unix.ENOTSUP) {
		return nil
	}
	return err
}
