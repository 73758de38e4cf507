package target

import (
	"errors"
	"io/fs"
	"os"
	"sync"
)

var (
	// ErrTooSmall: the destination is a block device smaller than the size
	// the caller asked for. Nothing has been written.
	ErrTooSmall = errors.New("target: destination device is smaller than the source")
	// ErrNotTarget: the destination is neither a regular file nor a block device.
	ErrNotTarget = errors.New("target: destination is not a regular file or block device")
	// ErrClosed: the File was already committed, aborted or closed.
	ErrClosed = errors.New("target: file already committed or closed")
	// ErrOutsideRoot: a name inside Options.Root (or an os.Root) resolves
	// outside it, through ".." or a symlink that leaves it. RootErr marks
	// os.Root's own error with it.
	ErrOutsideRoot = errors.New("target: path escapes the root")
)

// RootErr returns err marked with ErrOutsideRoot when it is os.Root's
// refusal of a name that escapes its root (the os package keeps that error
// unexported), else err unchanged. The text stays err's own.
func RootErr(err error) error {
	esc := rootEscape()
	if err == nil || esc == nil || errors.Is(err, ErrOutsideRoot) || !errors.Is(err, esc) {
		return err
	}
	return &outsideRootError{err}
}

type outsideRootError struct{ err error }

func (e *outsideRootError) Error() string   { return e.err.Error() }
func (e *outsideRootError) Unwrap() []error { return []error{e.err, ErrOutsideRoot} }

// rootEscape is os.Root's unexported "path escapes from parent" error,
// obtained once by asking a root for its parent (which touches nothing but
// the root directory itself). nil if it cannot be obtained: then RootErr
// marks nothing.
var rootEscape = sync.OnceValue(func() error {
	r, err := os.OpenRoot("/")
	if err != nil {
		return nil
	}
	defer r.Close()
	f, err := r.Open("..")
	if err == nil {
		f.Close()
		return nil
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return nil
	}
	return pe.Err
})
