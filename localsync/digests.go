package localsync

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/sparsesync/sparsesync/internal/manifest"
	"github.com/sparsesync/sparsesync/internal/syncmark"
	"github.com/sparsesync/sparsesync/sparse"
)

// Digests (Options.Manifest): a re-sync that compares also digests what it
// compared, per 64 KiB block (internal/manifest) and keeps them in a
// sidecar next to the destination, named by the quick-check mark. The next
// re-sync of a changed source into the unchanged destination reads only
// the source where the stored digests match, and reads the destination
// only for the blocks that differ or that the manifest does not cover.

// digests is one copy's manifest work: prev, the destination's manifest
// as the last sync left it (nil: none that holds), and rec, the next one.
type digests struct {
	prev *manifest.Manifest
	rec  *manifest.Recorder
}

// digestBlock is the digest block of a copy with comparison block bs.
func digestBlock(bs int64) int64 { return max(manifest.MinBlockSize, bs) }

// openDigests loads the manifest of the destination at path dst, when
// its mark says dst is unchanged since that manifest was taken, and starts
// the next one. It returns nil when the copy keeps no manifest. A manifest
// that cannot be used only costs the comparison its reads of dst.
func openDigests(dst string, o *Options) *digests {
	if !o.Manifest || o.NoSync {
		return nil
	}
	bs := digestBlock(o.BlockSize)
	var prev *manifest.Manifest
	if !o.Atomic && !o.FullCompare {
		prev = loadPrev(dst, bs, o)
	}
	rec, err := manifest.NewRecorder(prev, bs)
	if err != nil {
		o.Logger.Debug("localsync: no manifest", "dst", dst, "err", err)
		return nil
	}
	return &digests{prev: prev, rec: rec}
}

func loadPrev(dst string, bs int64, o *Options) *manifest.Manifest {
	f, err := os.OpenFile(dst, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	dinfo, err := sparse.Stat(f)
	if err != nil || !dinfo.Mode.IsRegular() {
		return nil
	}
	m, ok := syncmark.Read(f)
	if !ok || m.Digests == "" || m.Shape != shape(o) || !m.Unchanged(dinfo) {
		return nil
	}
	prev, err := manifest.Load(dst, m.Digests, bs, dinfo.Size)
	if err != nil {
		o.Logger.Debug("localsync: the destination's manifest is not used", "dst", dst, "err", err)
		return nil
	}
	return prev
}

// saveDigests writes the manifest this copy recorded as dst's sidecar and
// returns its ID for the mark; with nothing recorded (or no manifest kept)
// it removes any old sidecar, which the new mark does not name, and
// returns "".
func saveDigests(ctx context.Context, dst string, dg *digests, size int64, o *Options) string {
	if ctx.Err() != nil || (dg == nil && o.NoSync) {
		return ""
	}
	var m *manifest.Manifest
	ok := false
	if dg != nil {
		m, ok = dg.rec.Manifest(size)
	}
	if ok {
		err := manifest.Save(dst, m)
		if err == nil {
			return m.ID
		}
		o.Logger.Debug("localsync: no manifest kept", "dst", dst, "err", err)
	}
	if err := manifest.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		o.Logger.Debug("localsync: an old manifest stays (the mark no longer names it)", "dst", dst, "err", err)
	}
	return ""
}

// span is a range [lo, hi) of a comparison's buffers.
type span struct{ lo, hi int }

// digestPiece digests the source bytes s read at off, cut at the digest
// block's edges, and records them; with a previous manifest it returns the
// spans of s whose digest matches it (the destination holds those bytes),
// in order.
func (w *worker) digestPiece(s []byte, off int64) ([]span, error) {
	e := w.e
	if w.dig == nil {
		d, err := e.dg.rec.Digester()
		if err != nil {
			return nil, err
		}
		w.dig = d
	}
	w.ents = w.ents[:0]
	var same []span
	mbs := e.dg.rec.BlockSize()
	for lo, end := off, off+int64(len(s)); lo < end; {
		hi := min((lo/mbs+1)*mbs, end)
		t := w.dig.Sum(lo, s[lo-off:hi-off])
		w.ents = append(w.ents, manifest.Entry{Off: lo, Len: hi - lo, Tag: t})
		if e.dg.prev != nil {
			if pt, ok := e.dg.prev.Lookup(lo, hi-lo); ok && pt == t {
				r := span{int(lo - off), int(hi - off)}
				if k := len(same); k > 0 && same[k-1].hi == r.lo {
					same[k-1].hi = r.hi
				} else {
					same = append(same, r)
				}
			}
		}
		lo = hi
	}
	e.dg.rec.Add(w.ents)
	return same, nil
}

// prevCovers reports whether the previous manifest has a digest of a
// range that starts in [off, off+n).
func (e *engine) prevCovers(off, n int64) bool {
	return e.dg != nil && e.dg.prev != nil && e.dg.prev.Covers(off, off+n)
}
