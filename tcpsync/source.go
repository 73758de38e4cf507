package tcpsync

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/internal/syncmark"
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

// ExtentWalker is optionally implemented by a Source that can list its
// data extents from any offset on without building its whole map. A sync
// with a peer that takes the maps in windows (this version) then holds a
// window of the source's map at a time, whatever its extent count; a
// Source without it gives its whole map once (Extents), which the sender
// holds for the sync. WalkExtents calls fn for the data extents that end
// after from, in increasing order, the first clipped to start at from; an
// error from fn stops the walk and is returned as is.
type ExtentWalker interface {
	WalkExtents(ctx context.Context, from int64, fn func(sparse.Extent) error) error
}

// Identifier is optionally implemented by a Source that can name its
// version: equal identities mean equal contents. It enables the quick check
// and resuming. Return "" when unknown.
type Identifier interface {
	Identity() string
}

// FileSource is a Source over an open regular file or block device.
//
// A sync takes the file's identity (size, mtime, ctime) when it starts and
// compares it after its last read: a file written in place meanwhile fails
// the sync with ErrSourceChanged instead of giving a torn copy reported
// verified. The check does not depend on timing: the identity is taken
// only once the filesystem clock has moved past the file's last change
// (waiting at most a clock tick, or a second on filesystems with coarse
// timestamps), so any later write gives it a new ctime. On Linux 6.13 and
// later, filesystems with multigrain timestamps guarantee that by
// themselves. Block devices have no such time: writes to a device being
// sent are not detected (send a snapshot).
type FileSource struct {
	f    *os.File
	w    *sparse.Walker
	info sparse.FileInfo
	cold *coldread.Reader // cold ranges read with O_DIRECT; nil: buffered
	// afterRead, in tests, runs after every read.
	afterRead func(off int64)
}

var (
	_ Source       = (*FileSource)(nil)
	_ Identifier   = (*FileSource)(nil)
	_ ExtentWalker = (*FileSource)(nil)
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
func (s *FileSource) ReadAt(b []byte, off int64) (int, error) {
	n, err := s.cold.ReadAt(s.f, b, off)
	if s.afterRead != nil {
		s.afterRead(off)
	}
	return n, err
}

// cachedReads reads a FileSource through the page cache whatever the
// range's state: for a read that another read of the same range follows
// soon (a fetch's manifest, then the pieces asked for), which would go to
// storage twice if the first went direct.
type cachedReads struct{ s *FileSource }

func (c cachedReads) ReadAt(b []byte, off int64) (int, error) {
	n, err := c.s.f.ReadAt(b, off)
	if c.s.afterRead != nil {
		c.s.afterRead(off)
	}
	return n, err
}

// Size returns the size when the source was opened, or when the last sync
// of it started.
func (s *FileSource) Size() int64 { return s.info.Size }

// Extents walks the file's data extents: its data as every command counts
// it (sparse.Walker.DataMap: unwritten space is a hole, cached or not).
func (s *FileSource) Extents(ctx context.Context) (sparse.Map, error) { return s.w.DataMap(ctx) }

// WalkExtents walks the file's data extents from from on as SEEK_DATA
// reports them (sparse.Walker.WalkFrom). A sync in windows then takes out
// of each window the ranges that read as zeros without being stored, as
// Extents does for the whole map (dataOnly).
func (s *FileSource) WalkExtents(ctx context.Context, from int64, fn func(sparse.Extent) error) error {
	return s.w.WalkFrom(ctx, from, fn)
}

// dataOnly takes the unstored zeros (sparse.UnstoredZeros) out of a window
// of the walk's extents, m, as Walker.DataMap does for the whole map.
func (s *FileSource) dataOnly(ctx context.Context, m sparse.Map) (sparse.Map, error) {
	if !s.w.HolesKnown() || s.info.BlockDevice || m.Len() == 0 {
		return m, nil
	}
	if z := sparse.UnstoredZeros(ctx, s.f, m, make([]byte, 256<<10)); z.Len() > 0 {
		m = m.Difference(z)
	}
	return m, ctx.Err()
}

// Identity names the file's version: device, inode, size, mtime and ctime
// (syncmark.Version, which a local sync records too).
func (s *FileSource) Identity() string { return syncmark.Version(s.info) }

// refresh takes the file's identity at the start of a sync (the version it
// sends), once the filesystem clock is past the file's last change
// (sparse.NewSettledWalker). Not safe concurrently with a sync of s.
func (s *FileSource) refresh(ctx context.Context) error {
	w, err := sparse.NewSettledWalker(ctx, s.f)
	if err != nil {
		return err
	}
	s.w, s.info = w, w.Info()
	return nil
}

// changed reports whether the file is no longer the version refresh (or
// NewFileSource) recorded: another size, mtime or ctime. Called after the
// sync's last read of it.
func (s *FileSource) changed() error {
	info, err := sparse.Stat(s.f)
	if err != nil {
		return err
	}
	was := s.info
	switch {
	case info.Size != was.Size:
		return fmt.Errorf("%w: %s: size %d became %d", ErrSourceChanged, s.f.Name(), was.Size, info.Size)
	case !sparse.SameVersion(was, info):
		return fmt.Errorf("%w: %s was written while it was sent (ctime %s, now %s)", ErrSourceChanged, s.f.Name(),
			was.ChangeTime.Format(time.RFC3339Nano), info.ChangeTime.Format(time.RFC3339Nano))
	}
	return nil
}
