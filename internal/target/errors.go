package target

import "errors"

var (
	// ErrTooSmall: the destination is a block device smaller than the size
	// the caller asked for. Nothing has been written.
	ErrTooSmall = errors.New("target: destination device is smaller than the source")
	// ErrNotTarget: the destination is neither a regular file nor a block device.
	ErrNotTarget = errors.New("target: destination is not a regular file or block device")
	// ErrClosed: the File was already committed, aborted or closed.
	ErrClosed = errors.New("target: file already committed or closed")
)
