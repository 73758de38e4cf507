package tcpsync

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/sparse"
)

// Source is what a sender reads: a size, bytes at an offset, and where the
// data is. A storage engine can implement it over a volume that is not one
// flat file. ReadAt must be safe for concurrent use. Bytes outside the
// extents returned by Extents must read as zeros (they are never read).
type Source interface {
	io.ReaderAt
	Size() int64
	Extents(ctx context.Context) (sparse.Map, error)
}

// Identifier is optionally implemented by a Source that can name its
// version: equal identities mean equal contents. It enables the quick check
// and resuming. Return "" when unknown.
type Identifier interface {
	Identity() string
}

// FileSource is a Source over an open regular file or block device.
type FileSource struct {
	f    *os.File
	w    *sparse.Walker
	info sparse.FileInfo
	cold *coldread.Reader // cold ranges read with O_DIRECT; nil: buffered
}

var (
	_ Source     = (*FileSource)(nil)
	_ Identifier = (*FileSource)(nil)
)

// NewFileSource returns a Source over f (which it does not close).
func NewFileSource(f *os.File) (*FileSource, error) {
	w, err := sparse.NewWalker(f)
	if err != nil {
		return nil, err
	}
	return &FileSource{f: f, w: w, info: w.Info(), cold: coldread.New(f)}, nil
}

// ReadAt reads from the file: with O_DIRECT where no page of the range is
// cached and b is aligned (internal/coldread, as localsync), else through
// the page cache.
func (s *FileSource) ReadAt(b []byte, off int64) (int, error) { return s.cold.ReadAt(s.f, b, off) }

// Size returns the size when the source was opened.
func (s *FileSource) Size() int64 { return s.info.Size }

// Extents walks the file's data extents.
func (s *FileSource) Extents(ctx context.Context) (sparse.Map, error) { return s.w.Map(ctx) }

// Identity names the file's version: device, inode, size, mtime and ctime.
func (s *FileSource) Identity() string {
	i := s.info
	return fmt.Sprintf("file:%d:%d:%d:%d:%d", i.Dev, i.Ino, i.Size, i.ModTime.UnixNano(), i.ChangeTime.UnixNano())
}

// changed reports whether the file no longer has the size it had when opened.
func (s *FileSource) changed() error {
	info, err := sparse.Stat(s.f)
	if err != nil {
		return err
	}
	if info.Size != s.info.Size {
		return fmt.Errorf("%w: %s: size %d became %d", ErrSourceChanged, s.f.Name(), s.info.Size, info.Size)
	}
	return nil
}
