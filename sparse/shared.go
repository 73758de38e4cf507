package sparse

import (
	"context"
	"os"
)

// fiemapUntrusted are the flags under which a record's physical location
// says nothing about its bytes (not yet allocated, encoded, packed, inline)
// or the bytes are not what the blocks hold (unwritten: reads as zeros).
const fiemapUntrusted = FiemapUnknown | FiemapDelalloc | FiemapEncoded | FiemapDataEncrypted |
	FiemapNotAligned | FiemapDataInline | FiemapDataTail | FiemapUnwritten

// SharedExtents returns f's FIEMAP records within [0, size) that share
// their blocks with some other file (FiemapShared) and whose physical
// location can be trusted, in file order. It does not sync f first: dirty
// pages come back as Delalloc and are left out, so callers that need every
// shared block flush first.
func SharedExtents(ctx context.Context, f *os.File, size int64) ([]FiemapExtent, error) {
	return sharedIn(ctx, f, 0, size)
}

// sharedIn is SharedExtents over [lo, hi).
func sharedIn(ctx context.Context, f *os.File, lo, hi int64) ([]FiemapExtent, error) {
	var out []FiemapExtent
	err := Fiemap(ctx, f, lo, hi-lo, func(x FiemapExtent) error {
		if x.Flags&FiemapShared != 0 && x.Flags&fiemapUntrusted == 0 {
			out = append(out, x)
		}
		return nil
	})
	return out, err
}

// SameBlocks returns the ranges of [0, size) where a and b, the shared
// records of two files in file order (SharedExtents), map the same physical
// blocks at the same file offsets: records that overlap in the file and have
// the same physical-minus-logical offset. Such ranges hold equal bytes
// without reading them (a reflink copy neither side has rewritten since).
// Two files that each share blocks with other files (snapshots, backups)
// but not with each other have no range in common, whatever their flags.
func SameBlocks(size int64, a, b []FiemapExtent) (Map, error) {
	var same []Extent
	for i, j := 0, 0; i < len(a) && j < len(b); {
		x, y := a[i], b[j]
		lo, hi := max(x.Logical, y.Logical), min(x.Logical+x.Length, y.Logical+y.Length, size)
		if lo < hi && x.Physical-x.Logical == y.Physical-y.Logical {
			if n := len(same); n > 0 && same[n-1].End() >= lo {
				same[n-1].Len = max(same[n-1].End(), hi) - same[n-1].Off
			} else {
				same = append(same, Extent{Off: lo, Len: hi - lo})
			}
		}
		if x.Logical+x.Length <= y.Logical+y.Length {
			i++
		} else {
			j++
		}
	}
	return NewMap(size, same...)
}

// SharedRanges returns the ranges of [0, size) where a and b map the same
// physical blocks at the same offsets: SameBlocks of both files' shared
// extents. Like SharedExtents it does not sync; flush both files first
// (dirty pages could otherwise hide behind an old mapping). Filesystems
// without FIEMAP give an error matching errors.ErrUnsupported.
func SharedRanges(ctx context.Context, a, b *os.File, size int64) (Map, error) {
	return SharedRangesIn(ctx, a, b, 0, size)
}

// SharedRangesIn is SharedRanges over [lo, hi) only, in a map of size hi,
// for a caller that holds the files' maps a window at a time: it asks for
// and holds the shared records of that range.
func SharedRangesIn(ctx context.Context, a, b *os.File, lo, hi int64) (Map, error) {
	if lo >= hi {
		return NewMap(max(hi, 0))
	}
	sa, err := sharedIn(ctx, a, lo, hi)
	if err != nil {
		return Map{}, err
	}
	if len(sa) == 0 {
		return NewMap(hi)
	}
	sb, err := sharedIn(ctx, b, lo, hi)
	if err != nil {
		return Map{}, err
	}
	m, err := SameBlocks(hi, sa, sb)
	if err != nil {
		return Map{}, err
	}
	window, err := NewMap(hi, Extent{Off: lo, Len: hi - lo})
	if err != nil {
		return Map{}, err
	}
	return m.Intersect(window), nil
}
