package localsync

import (
	"os"

	"golang.org/x/sys/unix"
)

// The syscalls the fast paths make, as variables so that tests can record
// which one ran or inject errors (export_linux_test.go). Nothing else
// assigns them.
var (
	ioctlFiclone      = unix.IoctlFileClone
	ioctlFicloneRange = unix.IoctlFileCloneRange
	copyFileRange     = unix.CopyFileRange
)

// maxCopyRange caps one copy_file_range call (MAX_RW_COUNT: the kernel
// copies at most this much per call anyway).
const maxCopyRange = 0x7ffff000

// isUnsupported reports the errnos that mean "this method cannot do it,
// nothing was written": fall back to the next method. EIO, ENOSPC, EDQUOT
// and everything else are real errors.
func isUnsupported(err error) bool {
	switch err {
	case unix.EXDEV, unix.EINVAL, unix.EOPNOTSUPP, unix.ENOSYS, unix.EPERM,
		unix.EBADF, unix.ETXTBSY, unix.ENOTTY:
		return true
	}
	return false
}

// withFds runs fn with the raw descriptors of src and dst.
func withFds(src, dst *os.File, fn func(sfd, dfd int)) error {
	rs, err := src.SyscallConn()
	if err != nil {
		return err
	}
	rd, err := dst.SyscallConn()
	if err != nil {
		return err
	}
	var inner error
	err = rs.Control(func(s uintptr) {
		inner = rd.Control(func(d uintptr) { fn(int(s), int(d)) })
	})
	if err == nil {
		err = inner
	}
	return err
}

// cloneFile reflinks all of src into dst (FICLONE). handled is false when
// the filesystem(s) cannot, with nothing written.
func cloneFile(src, dst *os.File) (handled bool, err error) {
	var errno error
	if err := withFds(src, dst, func(sfd, dfd int) {
		for {
			if errno = ioctlFiclone(dfd, sfd); errno != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return false, err
	}
	if errno == nil {
		return true, nil
	}
	if isUnsupported(errno) {
		return false, errno
	}
	return true, errno
}

// cloneRange reflinks [off, off+n) of src to the same offset of dst
// (FICLONERANGE). It is all or nothing for the errnos that mean "cannot":
// handled false, nothing written.
func cloneRange(src, dst *os.File, off, n int64) (written int64, handled bool, err error) {
	var errno error
	arg := unix.FileCloneRange{Src_offset: uint64(off), Src_length: uint64(n), Dest_offset: uint64(off)}
	if err := withFds(src, dst, func(sfd, dfd int) {
		arg.Src_fd = int64(sfd)
		for {
			if errno = ioctlFicloneRange(dfd, &arg); errno != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return 0, false, err
	}
	switch {
	case errno == nil:
		return n, true, nil
	case isUnsupported(errno):
		return 0, false, errno
	}
	return 0, true, errno
}

// copyRange copies up to n bytes at off with one copy_file_range call.
// A 0 result means end of file (or, on a first call, "unsupported": the
// caller decides).
func copyRange(src, dst *os.File, off, n int64) (written int64, handled bool, err error) {
	var w int
	var errno error
	if err := withFds(src, dst, func(sfd, dfd int) {
		roff, woff := off, off
		for {
			w, errno = copyFileRange(sfd, &roff, dfd, &woff, int(min(n, maxCopyRange)), 0)
			if errno != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return 0, false, err
	}
	switch {
	case errno == nil:
		return int64(w), true, nil
	case isUnsupported(errno):
		return 0, false, errno
	}
	return 0, true, errno
}

// oTmpfile opens an unnamed temporary file in a directory.
const oTmpfile = unix.O_TMPFILE

// adviseSequential asks for aggressive readahead on f (as cp does), with
// length 0 so that no filesystem reads the whole file at once. Errors are
// ignored: it is only a hint.
func adviseSequential(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.Fadvise(int(fd), 0, 0, unix.FADV_SEQUENTIAL) })
	}
}

// startWriteback starts asynchronous writeback of f's dirty pages
// (sync_file_range SYNC_FILE_RANGE_WRITE over the whole file) without
// waiting for it. Errors are ignored: the final fdatasync reports them.
func startWriteback(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.SyncFileRange(int(fd), 0, 0, unix.SYNC_FILE_RANGE_WRITE) })
	}
}
