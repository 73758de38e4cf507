//go:build !linux

package localsync

import "os"

// coldReader reads through the page cache where O_DIRECT and cachestat(2)
// are not available.
type coldReader struct{}

func newColdReader(*os.File) *coldReader { return nil }

func (c *coldReader) readAt(f *os.File, b []byte, off int64) (int, error) { return f.ReadAt(b, off) }

func (c *coldReader) directBytes() int64 { return 0 }

func (c *coldReader) close() {}
