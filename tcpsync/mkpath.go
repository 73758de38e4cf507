package tcpsync

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
	"github.com/sparsesync/sparsesync/sparse"
)

// maxDepth is the most components a remote name may have (ValidateName):
// directories for a VM or a replica are a few levels deep, and each level
// costs the server a directory descriptor's walk, so a peer's 2,000-level
// name within 4,096 bytes is refused before anything is touched.
const maxDepth = 64

// dirWalk is the result of walking a name's directories: those it created
// (outermost first), so a refused OPEN can take them away again.
type dirWalk struct {
	created []string
}

// walkDirs resolves the directories of name beneath the root in one walk
// of directory descriptors (openat with O_NOFOLLOW|O_DIRECTORY, one level
// from the last, never a path resolved again from the root), creating the
// missing ones (mode 0755, like rsync --mkpath) when create is set, so a
// fresh server root accepts a push to "vm1/disk.img". A symlink on the way
// is ErrPathOutsideRoot, a file ErrNotFound; a last component that exists
// must not be a symlink and must be a regular file. ctx is checked at
// every level. On an error, the directories it created are removed.
func (s *Server) walkDirs(ctx context.Context, name string, create bool) (w *dirWalk, err error) {
	w = &dirWalk{}
	defer func() {
		if err != nil {
			w.undo(s)
		}
	}()
	rootDir, err := s.root.Open(".")
	if err != nil {
		return w, pathErr(sanitize(name), err)
	}
	defer rootDir.Close()
	var rootFd int
	if err := rawfd.Do(rootDir, func(fd int) (err error) { rootFd, err = unix.Dup(fd); return err }); err != nil {
		return w, pathErr(sanitize(name), err)
	}
	dir := rootFd
	defer func() { unix.Close(dir) }()
	comps := strings.Split(name, "/")
	for i, comp := range comps[:len(comps)-1] {
		if err := ctx.Err(); err != nil {
			return w, context.Cause(ctx)
		}
		sub := strings.Join(comps[:i+1], "/")
		fd, err := openDirAt(dir, comp)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(dir, comp, 0o755); err == nil {
				w.created = append(w.created, sub)
			}
			if err == nil || errors.Is(err, unix.EEXIST) {
				fd, err = openDirAt(dir, comp)
			}
		}
		if err != nil {
			return w, s.dirErr(name, sub, dir, comp, err)
		}
		unix.Close(dir)
		dir = fd
	}
	last := comps[len(comps)-1]
	var st unix.Stat_t
	switch err := unix.Fstatat(dir, last, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case errors.Is(err, unix.ENOENT):
	case err != nil:
		return w, pathErr(sanitize(name), &os.PathError{Op: "fstatat", Path: sanitize(name), Err: err})
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return w, fmt.Errorf("%w: %q is a symlink", ErrPathOutsideRoot, sanitize(name))
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return w, fmt.Errorf("%w: %q is a %s", ErrNotRegular, sanitize(name), sparse.TypeName(fileMode(uint32(st.Mode))))
	}
	return w, nil
}

// openDirAt opens the directory comp in dir, never through a symlink.
func openDirAt(dir int, comp string) (int, error) {
	for {
		fd, err := unix.Openat(dir, comp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err == unix.EINTR {
			continue
		}
		return fd, err
	}
}

// dirErr says why the directory sub (comp in dir) could not be walked.
func (s *Server) dirErr(name, sub string, dir int, comp string, err error) error {
	var st unix.Stat_t
	if unix.Fstatat(dir, comp, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			return fmt.Errorf("%w: %q: %s is a symlink", ErrPathOutsideRoot, sanitize(name), sanitize(sub))
		case unix.S_IFDIR:
		default:
			return fmt.Errorf("%w: %q: %s is not a directory", ErrNotFound, sanitize(name), sanitize(sub))
		}
	}
	return pathErr(sanitize(name), &os.PathError{Op: "openat", Path: sanitize(sub), Err: err})
}

// fileMode turns a stat mode's type bits into an fs.FileMode's.
func fileMode(m uint32) os.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return os.ModeDir
	case unix.S_IFLNK:
		return os.ModeSymlink
	case unix.S_IFIFO:
		return os.ModeNamedPipe
	case unix.S_IFSOCK:
		return os.ModeSocket
	case unix.S_IFCHR:
		return os.ModeDevice | os.ModeCharDevice
	case unix.S_IFBLK:
		return os.ModeDevice
	}
	return 0
}

// undo removes the directories the walk created, innermost first (only
// while they are empty: a concurrent session's files stay).
func (w *dirWalk) undo(s *Server) {
	for i := len(w.created) - 1; i >= 0; i-- {
		_ = s.root.Remove(w.created[i])
	}
	w.created = nil
}
