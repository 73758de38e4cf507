//go:build !linux

package tcpsync

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// uncachedReader reads through the page cache where the system offers no
// way around it.
type uncachedReader struct {
	f   *os.File
	buf []byte
}

func newUncachedReader(f *os.File) (*uncachedReader, error) {
	return &uncachedReader{f: f, buf: make([]byte, readBackSize)}, nil
}

func (r *uncachedReader) read(off, n int64) ([]byte, error) {
	got, err := r.f.ReadAt(r.buf[:n], off)
	if int64(got) == n {
		return r.buf[:n], nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = fmt.Errorf("short read of %d bytes at %d (got %d)", n, off, got)
	}
	return nil, err
}

func (r *uncachedReader) close() {}
