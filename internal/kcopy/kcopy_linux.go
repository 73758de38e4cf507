package kcopy

import (
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// The syscalls this package makes, as variables so that this package's own
// tests can fake what no real call does (a copy that moves nothing). Other
// packages inject through Inject (internal/target's Faults). Nothing else
// assigns them.
var (
	ioctlFiclone      = unix.IoctlFileClone
	ioctlFicloneRange = unix.IoctlFileCloneRange
	copyFileRange     = unix.CopyFileRange
)

// IsUnsupported reports the errnos that mean "this method cannot do it,
// nothing was written": fall back to the next method. EIO, ENOSPC, EDQUOT
// and everything else are real errors (but see CopyFileRange for EIO).
func IsUnsupported(err error) bool {
	switch err {
	case unix.EXDEV, unix.EINVAL, unix.EOPNOTSUPP, unix.ENOSYS, unix.EPERM,
		unix.EBADF, unix.ETXTBSY, unix.ENOTTY:
		return true
	}
	return false
}

// withFds runs fn with the raw descriptors of src and dst.
func withFds(src, dst *os.File, fn func(sfd, dfd int)) error {
	return rawfd.Do2(src, dst, func(sfd, dfd int) error { fn(sfd, dfd); return nil })
}

// classify turns a syscall's errno into (handled, err); eio says whether
// EIO too means "not handled".
func classify(errno error, eio bool) (bool, error) {
	switch {
	case errno == nil:
		return true, nil
	case IsUnsupported(errno), eio && errno == unix.EIO:
		return false, errno
	}
	return true, errno
}

// injected asks inject (when set) for a call's fate: its errno, or the
// limit on its length (0: none).
func injected(inject Inject) (limit int64, errno error) {
	if inject == nil {
		return 0, nil
	}
	return inject()
}

// CloneFile reflinks all of src into dst (FICLONE). handled is false when
// the filesystem(s) cannot, with nothing written.
func CloneFile(src, dst *os.File, inject Inject) (handled bool, err error) {
	var errno error
	if err := withFds(src, dst, func(sfd, dfd int) {
		for {
			if _, errno = injected(inject); errno == nil {
				errno = ioctlFiclone(dfd, sfd)
			}
			if errno != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return false, err
	}
	return classify(errno, false)
}

// CloneRange reflinks [off, off+n) of src to the same offsets of dst
// (FICLONERANGE). It is all or nothing for the errnos that mean "cannot":
// handled false, nothing written.
func CloneRange(src, dst *os.File, off, n int64, inject Inject) (handled bool, err error) {
	var errno error
	arg := unix.FileCloneRange{Src_offset: uint64(off), Src_length: uint64(n), Dest_offset: uint64(off)}
	if err := withFds(src, dst, func(sfd, dfd int) {
		arg.Src_fd = int64(sfd)
		for {
			if _, errno = injected(inject); errno == nil {
				errno = ioctlFicloneRange(dfd, &arg)
			}
			if errno != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return false, err
	}
	return classify(errno, false)
}

// CopyFileRange makes one copy_file_range call: up to min(n, MaxCopyRange)
// bytes at off of src to the same offset of dst. A 0 result means end of
// file or, on a first call, "unsupported" (CopyRange decides). EIO is "not
// handled" too, as in internal/poll: some FUSE, NFS and CIFS servers answer
// copy_file_range with it; a real I/O error then shows again in the
// read/write fallback, and CopyRange makes it ErrPartial once data moved.
func CopyFileRange(src, dst *os.File, off, n int64, inject Inject) (written int64, handled bool, err error) {
	var w int
	var errno error
	if err := withFds(src, dst, func(sfd, dfd int) {
		roff, woff := off, off
		for {
			ask := min(n, MaxCopyRange)
			limit, ierr := injected(inject)
			switch {
			case ierr == io.EOF:
				w, errno = 0, nil
			case ierr != nil:
				w, errno = 0, ierr
			default:
				if limit > 0 {
					ask = min(ask, limit)
				}
				w, errno = copyFileRange(sfd, &roff, dfd, &woff, int(ask), 0)
			}
			if errno != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return 0, false, err
	}
	if handled, err = classify(errno, true); err != nil {
		return 0, handled, err
	}
	return int64(w), true, nil
}
