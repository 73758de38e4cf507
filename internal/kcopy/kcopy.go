package kcopy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrPartial: copy_file_range failed with an errno that means "unsupported"
// after it had already copied part of the range. Falling back to another
// method could hide a real fault, so callers stop.
var ErrPartial = errors.New("kcopy: copy_file_range failed after it had copied data")

// MaxCopyRange caps one copy_file_range call (the kernel's MAX_RW_COUNT: it
// copies at most this much per call anyway).
const MaxCopyRange = 0x7ffff000

// Inject is the test seam on the system calls a copy makes into its
// destination (internal/target's File passes its Faults through it; nil
// injects nothing). It is asked before each call, EINTR retries included:
// a non-nil errno is that call's result and the call is not made; io.EOF
// makes copy_file_range return 0 bytes (its answer at end of file, and old
// kernels' across filesystems). Otherwise, for copy_file_range, limit > 0
// caps the bytes the call asks for: a short copy.
type Inject func() (limit int64, errno error)

// Dst is the destination of a copy: internal/target's File, whose faults
// reach every system call, or OS(f) for a bare file. Concurrent calls on
// disjoint ranges must be safe.
type Dst interface {
	io.WriterAt
	// CopyFileRange makes one copy_file_range call into the destination
	// (see the package function of that name).
	CopyFileRange(src *os.File, off, n int64) (written int64, handled bool, err error)
}

// OS is a bare *os.File as a Dst, with nothing injected.
func OS(f *os.File) Dst { return osDst{f} }

type osDst struct{ *os.File }

func (d osDst) CopyFileRange(src *os.File, off, n int64) (int64, bool, error) {
	return CopyFileRange(src, d.File, off, n, nil)
}

// CopyRange copies [off, off+n) of src to the same offsets of dst with
// copy_file_range, one call after another. handled false (done 0) means the
// kernel cannot copy between these files: nothing was written, fall back.
// Once data has moved, every failure is an error: ErrPartial wrapping the
// errno for an "unsupported" one, io.ErrUnexpectedEOF when the source ends
// early (it shrank). ctx is checked between calls.
func CopyRange(ctx context.Context, src *os.File, dst Dst, off, n int64) (done int64, handled bool, err error) {
	for done < n {
		if err := ctx.Err(); err != nil {
			return done, true, err
		}
		w, ok, err := dst.CopyFileRange(src, off+done, n-done)
		switch {
		case !ok && done == 0:
			return 0, false, err
		case !ok:
			return done, true, fmt.Errorf("%w: %w", ErrPartial, err)
		case err != nil:
			return done, true, err
		case w == 0 && done == 0:
			// 0 before any data: unsupported (kernels before 5.19).
			return 0, false, nil
		case w == 0:
			return done, true, io.ErrUnexpectedEOF
		}
		done += w
	}
	return done, true, nil
}

// ReadWrite copies [off, off+n) of src to the same offsets of dst through
// buf (pread, pwrite). A source that ends early gives io.ErrUnexpectedEOF
// with the bytes copied so far. ctx is checked once per buffer.
func ReadWrite(ctx context.Context, src io.ReaderAt, dst io.WriterAt, off, n int64, buf []byte) (done int64, err error) {
	if len(buf) == 0 && n > 0 {
		return 0, errors.New("kcopy: empty buffer")
	}
	for done < n {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		b := buf[:min(n-done, int64(len(buf)))]
		r, err := src.ReadAt(b, off+done)
		if r < len(b) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return done, err
		}
		if _, err := dst.WriteAt(b, off+done); err != nil {
			return done, err
		}
		done += int64(len(b))
	}
	return done, nil
}

// Copy copies [off, off+n) of src to the same offsets of dst: in the kernel
// where it can (a reflink on XFS and btrfs), else through buf. buf nil: a
// buffer of up to 1 MiB is allocated if the fallback runs. It reports how
// many bytes each way moved.
func Copy(ctx context.Context, src *os.File, dst Dst, off, n int64, buf []byte) (kernel, copied int64, err error) {
	kernel, handled, err := CopyRange(ctx, src, dst, off, n)
	if handled {
		return kernel, 0, err
	}
	if buf == nil {
		buf = make([]byte, min(n, 1<<20))
	}
	copied, err = ReadWrite(ctx, src, dst, off+kernel, n-kernel, buf)
	return kernel, copied, err
}
