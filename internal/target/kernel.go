package target

import (
	"math"
	"os"

	"github.com/sparsesync/sparsesync/internal/kcopy"
)

// The kernel's copies into the destination: reflinks and copy_file_range.
// internal/kcopy makes the system calls and sorts their errnos; these
// methods give it the destination's descriptor and pass its Faults down to
// every call (OpClone, OpCloneRange, OpCopyRange), so that nothing writes
// to a destination past its File. Each keeps kcopy's (handled, err) answer:
// handled false means nothing was written and the caller falls back; err is
// the bare errno (the caller names the file and the range).

var _ kcopy.Dst = (*File)(nil)

// Clone reflinks all of src into the file (FICLONE).
func (t *File) Clone(src *os.File) (handled bool, err error) {
	t.wrote(math.MaxInt64) // the whole file, whatever its size
	return kcopy.CloneFile(src, t.f, t.Injector(OpClone))
}

// CloneRange reflinks [off, off+n) of src to the same offsets of the file
// (FICLONERANGE): all or nothing.
func (t *File) CloneRange(src *os.File, off, n int64) (handled bool, err error) {
	t.wrote(off + n)
	return kcopy.CloneRange(src, t.f, off, n, t.Injector(OpCloneRange))
}

// CopyFileRange makes one copy_file_range call from src into the file: up
// to n bytes at off, to the same offset. kcopy.CopyRange and kcopy.Copy
// loop over it.
func (t *File) CopyFileRange(src *os.File, off, n int64) (written int64, handled bool, err error) {
	written, handled, err = kcopy.CopyFileRange(src, t.f, off, n, t.Injector(OpCopyRange))
	t.wrote(off + max(written, 0))
	return written, handled, err
}

// Injector returns the File's Faults for op as the kernel copy layer asks
// for them, before each system call: for a caller's own kernel call on the
// destination's behalf (a reflink probe into a temporary file next to it).
// nil when the File has no Faults.
func (t *File) Injector(op Op) kcopy.Inject {
	if t == nil || t.faults == nil {
		return nil
	}
	return func() (int64, error) {
		r, ok := t.faults.fire(op, t.path)
		if !ok {
			return 0, nil
		}
		if r.Err == nil {
			return int64(r.Short), nil
		}
		return 0, r.Err
	}
}
