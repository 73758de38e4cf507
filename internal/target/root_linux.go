package target

import (
	"io/fs"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// OpenNoFollow opens name inside root (a path when root is nil) for flag,
// never following its last component (a symlink there fails with ELOOP)
// and never leaking the descriptor (O_CLOEXEC). os.Root itself follows a
// symlink that stays inside the root, so the last component is opened here
// with openat(O_NOFOLLOW) relative to its directory, which root opened. A
// last component "." or ".." fails with EISDIR.
func OpenNoFollow(root *os.Root, name string, flag int, perm fs.FileMode) (*os.File, error) {
	flag |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if root == nil {
		return os.OpenFile(name, flag, perm)
	}
	dir, base := path.Split(name)
	if base == "" || base == "." || base == ".." {
		return nil, &fs.PathError{Op: "open", Path: name, Err: unix.EISDIR}
	}
	if dir == "" {
		dir = "."
	}
	d, err := root.Open(dir)
	if err != nil {
		return nil, RootErr(err)
	}
	defer d.Close()
	fd := -1
	var oerr error
	if err := rawfd.Do(d, func(dfd int) error {
		oerr = rawfd.Retry(func() (err error) {
			fd, err = unix.Openat(dfd, base, flag, uint32(perm.Perm()))
			return err
		})
		return nil
	}); err != nil {
		return nil, err
	}
	if oerr != nil {
		return nil, &fs.PathError{Op: "openat", Path: name, Err: oerr}
	}
	return os.NewFile(uintptr(fd), name), nil
}
