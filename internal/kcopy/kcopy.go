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

// CopyRange copies [off, off+n) of src to the same offsets of dst with
// copy_file_range, one call after another. handled false (done 0) means the
// kernel cannot copy between these files: nothing was written, fall back.
// Once data has moved, every failure is an error: ErrPartial wrapping the
// errno for an "unsupported" one, io.ErrUnexpectedEOF when the source ends
// early (it shrank). ctx is checked between calls.
func CopyRange(ctx context.Context, src, dst *os.File, off, n int64) (done int64, handled bool, err error) {
	for done < n {
		if err := ctx.Err(); err != nil {
			return done, true, err
		}
		w, ok, err := CopyFileRange(src, dst, off+done, n-done)
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
// where it can (a reflink on XFS and btrfs), else through buf, writing with
// w (dst itself when nil). buf nil: a buffer of up to 1 MiB is allocated
// if the fallback runs. It reports how many bytes each way moved.
func Copy(ctx context.Context, src, dst *os.File, w io.WriterAt, off, n int64, buf []byte) (kernel, copied int64, err error) {
	kernel, handled, err := CopyRange(ctx, src, dst, off, n)
	if handled {
		return kernel, 0, err
	}
	if w == nil {
		w = dst
	}
	if buf == nil {
		buf = make([]byte, min(n, 1<<20))
	}
	copied, err = ReadWrite(ctx, src, w, off+kernel, n-kernel, buf)
	return kernel, copied, err
}
