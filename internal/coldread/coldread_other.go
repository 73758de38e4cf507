//go:build !linux

package coldread

import (
	"errors"
	"io/fs"
	"os"
)

// Reader reads through the page cache where O_DIRECT and cachestat(2) are
// not available.
type Reader struct{}

// New returns nil: every read is an ordinary ReadAt.
func New(*os.File) *Reader { return nil }

// ReadAt is f.ReadAt.
func (c *Reader) ReadAt(f *os.File, b []byte, off int64) (int, error) { return f.ReadAt(b, off) }

// Cold is false: nothing is read directly.
func (c *Reader) Cold(off, n int64) bool { return false }

// DirectBytes is 0.
func (c *Reader) DirectBytes() int64 { return 0 }

// WillNeed does nothing: the system has no read-ahead advice.
func WillNeed(*os.File, int64, int64) {}

// OpenDirect fails with errors.ErrUnsupported: there is no O_DIRECT here.
func OpenDirect(f *os.File) (*os.File, error) {
	return nil, &fs.PathError{Op: "open_direct", Path: f.Name(), Err: errors.ErrUnsupported}
}
