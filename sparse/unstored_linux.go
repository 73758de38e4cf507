package sparse

import (
	"context"
	"os"
)

// UnstoredZeros returns the parts of data (the source's SEEK_DATA map) that
// read as zeros without being stored: FIEMAP shows no written extent there
// (a hole or an unwritten extent), no page of the range is dirty or under
// writeback, and every page of it that is cached holds zeros.
//
// This is what a file's data is, for every command (DataMap): XFS needs
// it, and ext4 too: after a reflinked file is rewritten in place, its
// copy-on-write preallocations (and fallocated space) are reported by
// SEEK_DATA as data while any page over them is cached (readahead of the
// neighbouring data is enough), though they read as zeros; a re-sync would
// copy them every time they happen to be cached. Treating them as holes
// makes the copy's hole map a function of what is stored, not of the page
// cache. A write that races the check changes the source's mtime, which
// the copy checks at its end (ErrSourceChanged).
//
// Any failure (no FIEMAP, no cachestat) returns an empty map: the ranges
// are then copied as data, which is always exact. buf is scratch space for
// reading cached pages (any size above zero); nil allocates one only if a
// cached range has to be read (most calls read nothing: a whole-file clone
// then allocates nothing).
func UnstoredZeros(ctx context.Context, f *os.File, data Map, buf []byte) Map {
	empty, _ := NewMap(data.Size())
	if data.Len() == 0 {
		return empty
	}
	// Only the span of data is asked for: a window of a map (extents from
	// some offset on) costs what it covers.
	ext := data.Extents()
	lo, hi := ext[0].Off, ext[len(ext)-1].End()
	var stored []Extent
	err := Fiemap(ctx, f, lo, hi-lo, func(x FiemapExtent) error {
		if x.Flags&FiemapUnwritten == 0 && x.Logical < data.Size() {
			stored = append(stored, Extent{Off: x.Logical, Len: min(x.Length, data.Size()-x.Logical)})
		}
		return nil
	})
	if err != nil {
		return empty
	}
	storedMap, err := NewMap(data.Size(), clip(stored, data.Size())...)
	if err != nil {
		return empty
	}
	candidates := data.Difference(storedMap)
	if candidates.Len() == 0 {
		return empty
	}
	var zeros []Extent
	var failed bool
	// check keeps the parts of x with no dirty page that read as zeros,
	// halving a range with dirty pages down to single pages.
	var check func(x Extent)
	check = func(x Extent) {
		st, err := cachestat(f, x.Off, x.Len)
		if err != nil {
			failed = true
			return
		}
		if st.Dirty != 0 || st.Writeback != 0 {
			if half := x.Len / 2 / pageSize * pageSize; half > 0 && !failed {
				check(Extent{Off: x.Off, Len: half})
				check(Extent{Off: x.Off + half, Len: x.Len - half})
			}
			return
		}
		if st.Cache != 0 && len(buf) == 0 {
			buf = make([]byte, unstoredBuf)
		}
		if st.Cache != 0 && !readsZero(f, x, buf) {
			return
		}
		zeros = append(zeros, x)
	}
	for _, x := range candidates.Extents() {
		if check(x); failed || ctx.Err() != nil {
			return empty
		}
	}
	m, err := NewMap(data.Size(), zeros...)
	if err != nil {
		return empty
	}
	return m
}

// unstoredBuf is the scratch buffer UnstoredZeros allocates when given none.
const unstoredBuf = 256 << 10

// pageSize is the granularity at which dirty pages are told apart.
const pageSize = 4096

// clip drops the parts of xs at or beyond size.
func clip(xs []Extent, size int64) []Extent {
	out := xs[:0]
	for _, x := range xs {
		if x.Off < size && x.Len > 0 {
			x.Len = min(x.Len, size-x.Off)
			out = append(out, x)
		}
	}
	return out
}

// readsZero reads x from f (through the page cache, where it is) and
// reports whether it is all zeros.
func readsZero(f *os.File, x Extent, buf []byte) bool {
	for off := x.Off; off < x.End(); {
		b := buf[:min(int64(len(buf)), x.End()-off)]
		if n, _ := f.ReadAt(b, off); n < len(b) || !IsZero(b) {
			return false
		}
		off += int64(len(b))
	}
	return true
}
