package localsync

import (
	"errors"

	"github.com/sparsesync/sparsesync/internal/target"
)

// Refusals: returned before anything is written.
var (
	// ErrSameFile: source and destination are the same file (same device
	// and inode, which includes hard links and symlinks to the source).
	ErrSameFile = errors.New("localsync: source and destination are the same file")
	// ErrDestinationTooSmall: the destination is a block device smaller than
	// the source.
	ErrDestinationTooSmall = target.ErrTooSmall
	// ErrReflinkUnsupported: Reflink is ReflinkAlways (or Method is
	// MethodReflink) but the files cannot share blocks (different
	// filesystems, or a filesystem without reflink).
	ErrReflinkUnsupported = errors.New("localsync: reflink not supported between these files")
	// ErrInvalidOptions: the options contradict each other.
	ErrInvalidOptions = errors.New("localsync: invalid options")
)

// Failures during the copy.
var (
	// ErrSourceChanged: the source's size, mtime, ctime or inode changed
	// while it was copied (or it shrank under a read). The destination is not
	// a good copy: in atomic mode it was left as it was, in place it holds a
	// mix and must be synced again.
	ErrSourceChanged = errors.New("localsync: source changed during the copy")
	// ErrMethodFailed: a fast path that had already copied data failed with
	// an error that would otherwise mean "not supported"; falling back then
	// could hide a real fault, so the copy stops.
	ErrMethodFailed = errors.New("localsync: copy method failed after it had copied data")
)
