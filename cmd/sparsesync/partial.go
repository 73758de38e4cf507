package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/sparsesync/sparsesync/sparse"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// partialError is an in-place sync (no --atomic) that failed or was
// interrupted after it had started changing an existing destination: the
// destination is neither the old version nor the new one. Users coming
// from rsync expect the old file intact, so the error line says so and how
// to finish.
type partialError struct {
	dst string
	// maybe: we cannot look at the destination (a remote file), so we say
	// it may have been changed.
	maybe bool
	err   error
}

func (e *partialError) Error() string { return e.err.Error() + "; " + e.note() }
func (e *partialError) Unwrap() error { return e.err }

// note is what the user reads after the cause.
func (e *partialError) note() string {
	left := "was left partly updated"
	if e.maybe {
		left = "may have been left partly updated"
	}
	return fmt.Sprintf("%s %s (neither the old nor the new version): run the same command again to finish "+
		"(only what still differs is written), or use --atomic to keep the old file until the new one is complete", e.dst, left)
}

// dstState is what an in-place sync's destination looked like before it
// ran: whether it existed, and its inode change time (which every write,
// truncate and hole punch moves, and nothing can set back).
type dstState struct {
	existed bool
	device  bool
	ctime   time.Time
}

func statDst(path string) dstState {
	f, err := os.Open(path)
	if err != nil {
		return dstState{}
	}
	defer f.Close()
	info, err := sparse.Stat(f)
	if err != nil {
		return dstState{}
	}
	return dstState{existed: true, device: info.BlockDevice, ctime: info.ChangeTime}
}

// partial wraps err, the failure of an in-place sync to path, when the sync
// changed the destination that existed before (before): a block device's
// node does not show writes, so for one the note says "may".
func partial(err error, path string, before dstState) error {
	if err == nil || !before.existed || errors.As(err, new(usageError)) {
		return err
	}
	after := statDst(path)
	switch {
	case before.device:
		return &partialError{dst: path, maybe: true, err: err}
	case after.existed && !after.ctime.Equal(before.ctime):
		return &partialError{dst: path, err: err}
	}
	return err
}

// remotePartial wraps err, the failure of an in-place push to the remote
// file remote, when the server may have started changing it: the transfer
// had begun (started), or the server failed (not on authenticating or
// naming the file). We cannot look at the remote file, so the note says
// "may".
func remotePartial(err error, remote string, atomic, started bool) error {
	if err == nil || atomic || errors.As(err, new(usageError)) {
		return err
	}
	for _, before := range []error{tcpsync.ErrUnauthorized, tcpsync.ErrTokenFile, tcpsync.ErrVersion, tcpsync.ErrBadPath,
		tcpsync.ErrPathOutsideRoot, tcpsync.ErrNotRegular, tcpsync.ErrBusy} {
		if errors.Is(err, before) {
			return err // refused before anything was written
		}
	}
	if started || errors.Is(err, tcpsync.ErrRemote) || errors.Is(err, tcpsync.ErrVerify) ||
		errors.Is(err, tcpsync.ErrSourceChanged) || errors.Is(err, tcpsync.ErrShutdown) {
		return &partialError{dst: "the remote " + remote, maybe: true, err: err}
	}
	return err
}

// intoDir is dst, or dst/NAME (NAME the last element of src, a local path
// or a remote name) when dst is an existing directory: what cp and rsync
// do with a directory as the destination.
func intoDir(dst, src string) string {
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		return filepath.Join(dst, path.Base(filepath.ToSlash(src)))
	}
	return dst
}
