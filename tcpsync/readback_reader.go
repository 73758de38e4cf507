package tcpsync

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sparsesync/sparsesync/internal/coldread"
)

// uncachedReader reads a file bypassing the page cache: through a second
// descriptor opened with O_DIRECT (coldread.OpenDirect: via /proc/self/fd,
// so it is the same inode even unlinked or hard to name), or, where
// O_DIRECT is refused, through the file itself after dropCache dropped its
// clean pages (the caller has just made them clean with fdatasync; where
// the system offers no way around the cache, a plain read).
type uncachedReader struct {
	f      *os.File // what is read
	direct bool     // f is an O_DIRECT descriptor this reader owns
	buf    []byte   // aligned to coldread.Align
}

func newUncachedReader(f *os.File) (*uncachedReader, error) {
	r := &uncachedReader{f: f, buf: coldread.AlignedBuffer(readBackSize)}
	if d, err := coldread.OpenDirect(f); err == nil {
		r.f, r.direct = d, true
		return r, nil
	}
	// No O_DIRECT here (or no /proc): drop the cached pages instead.
	if err := dropCache(f); err != nil {
		return nil, err
	}
	return r, nil
}

// read returns n bytes at off (off aligned to coldread.Align, n at most
// readBackSize); the file must hold them (a short read is an error).
func (r *uncachedReader) read(off, n int64) ([]byte, error) {
	want := n
	if r.direct {
		want = (n + coldread.Align - 1) / coldread.Align * coldread.Align
	}
	got, err := r.f.ReadAt(r.buf[:want], off)
	if int64(got) >= n {
		return r.buf[:n], nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = fmt.Errorf("short read of %d bytes at %d (got %d)", n, off, got)
	}
	return nil, err
}

// ReadAt reads len(b) bytes at off through read, a readBackSize at most
// at a time, from off rounded down to coldread.Align when direct.
func (r *uncachedReader) ReadAt(b []byte, off int64) (int, error) {
	done := 0
	for done < len(b) {
		o := off + int64(done)
		a := o
		if r.direct {
			a = o / coldread.Align * coldread.Align
		}
		got, err := r.read(a, min(int64(len(b)-done)+o-a, readBackSize))
		if err != nil {
			return done, err
		}
		done += copy(b[done:], got[o-a:])
	}
	return done, nil
}

func (r *uncachedReader) close() {
	if r.direct {
		r.f.Close()
	}
}
