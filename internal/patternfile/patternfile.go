// Package patternfile writes sparse files from a list of data ranges, the
// data a deterministic, never-zero pattern of the offset: a copy can be
// checked byte for byte and no written byte looks like a hole.
//
// It is production code (bench generates its workloads with it) and imports
// nothing of ours, so every package's tests can use it too, through the test
// helper internal/testutil/layout.
package patternfile

import "os"

// Range is a byte range [Off, Off+Len).
type Range struct{ Off, Len int64 }

// End returns the first offset after the range.
func (r Range) End() int64 { return r.Off + r.Len }

// Layout is a file to build: its size and where its data goes.
type Layout struct {
	Name string
	Size int64
	Data []Range
}

// DataBytes returns the bytes of data the layout writes.
func (l Layout) DataBytes() int64 {
	var n int64
	for _, r := range l.Data {
		n += r.Len
	}
	return n
}

// Pattern fills b with the bytes a layout writes at offset off: a
// deterministic, never-zero function of the offset, so a copy can be checked
// byte for byte and no written byte looks like a hole.
func Pattern(b []byte, off int64) {
	for i := range b {
		x := uint64(off+int64(i)) * 0x9E3779B97F4A7C15
		b[i] = byte(x>>56) | 1
	}
}

// Write writes l at path: it sets the size first (so XFS makes no
// speculative preallocation) and then writes every data range with Pattern.
// The data is left unflushed, as a writer would leave it.
func Write(path string, l Layout) (err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if err := f.Truncate(l.Size); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for _, r := range l.Data {
		for off := r.Off; off < r.End(); {
			n := min(int64(len(buf)), r.End()-off)
			Pattern(buf[:n], off)
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				return err
			}
			off += n
		}
	}
	return nil
}
