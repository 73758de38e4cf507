package syncmark

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/sparsesync/sparsesync/sparse"
)

// Attr is the extended attribute that holds a local sync's mark.
const Attr = "user.sparsesync.synced"

// maxMark bounds what Read accepts: a mark is about 150 bytes.
const maxMark = 1 << 10

// Version names one version of a file: its device, inode, size, mtime and
// ctime (sparse.SameVersion's fields). Equal names mean the same version
// under the settle rule (see the package documentation).
func Version(i sparse.FileInfo) string {
	return fmt.Sprintf("file:%d:%d:%d:%d:%d", i.Dev, i.Ino, i.Size, i.ModTime.UnixNano(), i.ChangeTime.UnixNano())
}

// Mark is what a verified, durable sync records on its destination.
type Mark struct {
	// Source is the source's version (Version).
	Source string `json:"src"`
	// Shape names the options that shape the result beyond the source's
	// bytes and holes (for localsync, "zeros" when all-zero blocks became
	// holes); a sync asked for another shape compares.
	Shape string `json:"shape,omitempty"`
	// DataBytes is the source's data, so that a quick check can report it
	// without walking the source.
	DataBytes int64 `json:"data"`
	// Digests is the ID of the destination's manifest (internal/manifest):
	// its stored block digests hold while the mark does. Empty: none.
	Digests string `json:"digests,omitempty"`
	// The destination as the sync left it.
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime"`
}

// Matches reports whether m was left by a sync of the source version src,
// with shape, into dst as it is now.
func (m Mark) Matches(src, dst sparse.FileInfo, shape string) bool {
	return m.Source != "" && m.Source == Version(src) && m.Shape == shape && m.Unchanged(dst)
}

// Unchanged reports whether dst is, as it is now, the file m was left on,
// unchanged since: what the sync wrote there, whatever the source is now.
func (m Mark) Unchanged(dst sparse.FileInfo) bool {
	return m.Ino != 0 && m.Dev == dst.Dev && m.Ino == dst.Ino && m.Size == dst.Size &&
		m.Mtime == dst.ModTime.UnixNano()
}

// Read returns the mark on f; ok is false when there is none, it cannot be
// read (no extended attributes there) or it is not a mark of this version.
func Read(f *os.File) (m Mark, ok bool) {
	b, err := getxattr(f, Attr, maxMark)
	if err != nil || json.Unmarshal(b, &m) != nil {
		return Mark{}, false
	}
	return m, true
}

// Write records m on dst, filling in dst's identity: once any later change
// of dst's bytes must move its mtime (sparse.SettleMtime: an mtime given in
// the clock's current granule is set back a nanosecond), it stores the mark.
// Call it only once dst's data is durable. An error means no mark was
// written: the next sync compares.
func Write(ctx context.Context, dst *os.File, m Mark) error {
	info, err := sparse.SettleMtime(ctx, dst)
	if err != nil {
		return err
	}
	if !info.Mode.IsRegular() {
		return &os.PathError{Op: "setxattr", Path: dst.Name(), Err: fmt.Errorf("%w: not a regular file", errUnsupported)}
	}
	m.Dev, m.Ino, m.Size, m.Mtime = info.Dev, info.Ino, info.Size, info.ModTime.UnixNano()
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return setxattr(dst, Attr, b)
}

// Clear removes any mark from f. A file without one, or where extended
// attributes are not supported, is not an error.
func Clear(f *os.File) error { return removexattr(f, Attr) }
