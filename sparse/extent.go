package sparse

import (
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"
)

// Extent is a byte range [Off, Off+Len) of a file.
type Extent struct {
	Off int64
	Len int64
}

// End returns the first offset after the extent.
func (e Extent) End() int64 { return e.Off + e.Len }

func (e Extent) String() string { return fmt.Sprintf("[%d,%d)", e.Off, e.End()) }

// Map is an extent map: sorted, non-overlapping, coalesced extents (no two
// touch) that all lie within [0, Size). It usually says where a file's data
// is; its complement within the size (Holes) says where the holes are.
//
// The zero Map is the empty map of size 0. Maps are values: operations return
// new maps and never modify their operands, so a Map may be shared between
// goroutines as long as nobody writes to the slice returned by Extents.
type Map struct {
	size int64
	ext  []Extent
}

// NewMap builds a map of the given size from extents in any order, merging
// overlapping and touching ones and dropping empty ones. It fails if the size
// is negative or an extent is negative, overflows or ends past the size.
func NewMap(size int64, extents ...Extent) (Map, error) {
	if size < 0 {
		return Map{}, &mapError{cause: ErrOutOfRange, index: -1, msg: fmt.Sprintf("negative size %d", size)}
	}
	for i, e := range extents {
		if err := checkRange(e, size); err != nil {
			err.index = i
			return Map{}, err
		}
	}
	ext := slices.Clone(extents)
	slices.SortFunc(ext, func(a, b Extent) int {
		switch {
		case a.Off < b.Off:
			return -1
		case a.Off > b.Off:
			return 1
		}
		return 0
	})
	m := Map{size: size, ext: ext[:0]}
	for _, e := range ext {
		if e.Len == 0 {
			continue
		}
		if n := len(m.ext); n > 0 && e.Off <= m.ext[n-1].End() {
			m.ext[n-1].Len = max(m.ext[n-1].End(), e.End()) - m.ext[n-1].Off
			continue
		}
		m.ext = append(m.ext, e)
	}
	return m, nil
}

// FromExtents takes a map that came from outside (a decoded message, a
// caller's slice) and checks that it is already canonical: sorted, not
// overlapping, not touching, every extent non-empty and within the size, no
// integer overflow. The returned map owns ext; the caller must not modify it.
func FromExtents(size int64, ext []Extent) (Map, error) {
	if err := Validate(size, ext); err != nil {
		return Map{}, err
	}
	return Map{size: size, ext: ext}, nil
}

// Validate reports why ext is not a canonical extent map within size, or nil.
// The error matches ErrInvalidMap and one of ErrOutOfOrder, ErrNotCoalesced or
// ErrOutOfRange.
func Validate(size int64, ext []Extent) error {
	if size < 0 {
		return &mapError{cause: ErrOutOfRange, index: -1, msg: fmt.Sprintf("negative size %d", size)}
	}
	var prevEnd int64
	for i, e := range ext {
		if e.Len <= 0 {
			return &mapError{cause: ErrOutOfRange, index: i, msg: fmt.Sprintf("length %d is not positive", e.Len)}
		}
		if err := checkRange(e, size); err != nil {
			err.index = i
			return err
		}
		if i > 0 {
			switch {
			case e.Off < prevEnd:
				return &mapError{cause: ErrOutOfOrder, index: i, msg: fmt.Sprintf("offset %d is before the previous end %d", e.Off, prevEnd)}
			case e.Off == prevEnd:
				return &mapError{cause: ErrNotCoalesced, index: i, msg: fmt.Sprintf("offset %d touches the previous extent", e.Off)}
			}
		}
		prevEnd = e.End()
	}
	return nil
}

func checkRange(e Extent, size int64) *mapError {
	switch {
	case e.Off < 0 || e.Len < 0:
		return &mapError{cause: ErrOutOfRange, msg: fmt.Sprintf("%d+%d is negative", e.Off, e.Len)}
	case e.Len > math.MaxInt64-e.Off:
		return &mapError{cause: ErrOutOfRange, msg: fmt.Sprintf("%d+%d overflows", e.Off, e.Len)}
	case e.End() > size:
		return &mapError{cause: ErrOutOfRange, msg: fmt.Sprintf("%s ends past size %d", e, size)}
	}
	return nil
}

// Size returns the size the map lies within.
func (m Map) Size() int64 { return m.size }

// Extents returns the extents in order. The slice belongs to the map: read it,
// never modify it.
func (m Map) Extents() []Extent { return m.ext }

// Len returns the number of extents.
func (m Map) Len() int { return len(m.ext) }

// Bytes returns the total length of the extents.
func (m Map) Bytes() int64 {
	var n int64
	for _, e := range m.ext {
		n += e.Len
	}
	return n
}

// Equal reports whether two maps have the same size and extents.
func (m Map) Equal(o Map) bool { return m.size == o.size && slices.Equal(m.ext, o.ext) }

// Contains reports whether off lies inside one of the extents.
func (m Map) Contains(off int64) bool {
	_, found := slices.BinarySearchFunc(m.ext, off, func(e Extent, off int64) int {
		switch {
		case e.End() <= off:
			return -1
		case e.Off > off:
			return 1
		}
		return 0
	})
	return found
}

// String renders the map as "size=N [a,b) [c,d)".
func (m Map) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "size=%d", m.size)
	for _, e := range m.ext {
		b.WriteByte(' ')
		b.WriteString(e.String())
	}
	return b.String()
}

// Holes returns the complement of m within its size.
func (m Map) Holes() Map {
	full := Map{size: m.size}
	if m.size > 0 {
		full.ext = []Extent{{0, m.size}}
	}
	return full.Difference(m)
}

// Union returns the ranges in m or o. The result's size is the larger size.
func (m Map) Union(o Map) Map { return combine(m, o, func(a, b bool) bool { return a || b }) }

// Intersect returns the ranges in both m and o. The result's size is the larger size.
func (m Map) Intersect(o Map) Map { return combine(m, o, func(a, b bool) bool { return a && b }) }

// Difference returns the ranges in m but not in o. The result's size is the larger size.
func (m Map) Difference(o Map) Map { return combine(m, o, func(a, b bool) bool { return a && !b }) }

// Resize returns the map with a new size, cutting extents that end past it.
func (m Map) Resize(size int64) Map {
	if size < 0 {
		size = 0
	}
	out := Map{size: size}
	for _, e := range m.ext {
		if e.Off >= size {
			break
		}
		if e.End() > size {
			e.Len = size - e.Off
		}
		out.ext = append(out.ext, e)
	}
	return out
}

// combine sweeps both maps once, keeping [pos, next) wherever keep says so.
// keep(false, false) must be false.
func combine(a, b Map, keep func(inA, inB bool) bool) Map {
	out := Map{size: max(a.size, b.size)}
	ae, be := a.ext, b.ext
	var pos int64
	for len(ae) > 0 || len(be) > 0 {
		for len(ae) > 0 && ae[0].End() <= pos {
			ae = ae[1:]
		}
		for len(be) > 0 && be[0].End() <= pos {
			be = be[1:]
		}
		if len(ae) == 0 && len(be) == 0 {
			break
		}
		next := int64(math.MaxInt64)
		inA := len(ae) > 0 && ae[0].Off <= pos
		inB := len(be) > 0 && be[0].Off <= pos
		if len(ae) > 0 {
			next = min(next, boundary(ae[0], inA))
		}
		if len(be) > 0 {
			next = min(next, boundary(be[0], inB))
		}
		if keep(inA, inB) {
			out.add(Extent{pos, next - pos})
		}
		pos = next
	}
	return out
}

func boundary(e Extent, inside bool) int64 {
	if inside {
		return e.End()
	}
	return e.Off
}

// add appends e, which must start at or after the last extent's end, merging
// it with the last extent when they touch.
func (m *Map) add(e Extent) {
	if e.Len <= 0 {
		return
	}
	if n := len(m.ext); n > 0 && m.ext[n-1].End() == e.Off {
		m.ext[n-1].Len += e.Len
		return
	}
	m.ext = append(m.ext, e)
}

// RoundOut widens every extent to whole blocks of size bs (the last block is
// cut at the map's size) and merges what then touches. Use it to turn a data
// map into the set of blocks that hold any data. bs must be positive.
func (m Map) RoundOut(bs int64) Map {
	mustBlockSize(bs)
	out := Map{size: m.size}
	for _, e := range m.ext {
		off := e.Off - e.Off%bs
		end := e.End()
		if r := end % bs; r != 0 {
			if end > m.size-(bs-r) {
				end = m.size
			} else {
				end += bs - r
			}
		}
		if n := len(out.ext); n > 0 && off <= out.ext[n-1].End() {
			out.ext[n-1].Len = max(end, out.ext[n-1].End()) - out.ext[n-1].Off
			continue
		}
		out.ext = append(out.ext, Extent{off, end - off})
	}
	return out
}

// RoundIn narrows every extent to the whole blocks of size bs it covers and
// drops extents that cover none. An extent that ends at the map's size covers
// the short last block. Use it to find blocks that are entirely data (or,
// applied to Holes, entirely hole). bs must be positive.
func (m Map) RoundIn(bs int64) Map {
	mustBlockSize(bs)
	out := Map{size: m.size}
	for _, e := range m.ext {
		off, end := e.Off, e.End()
		if r := off % bs; r != 0 {
			if off > end-(bs-r) {
				continue
			}
			off += bs - r
		}
		if end != m.size {
			end -= end % bs
		}
		if end > off {
			out.add(Extent{off, end - off})
		}
	}
	return out
}

// Blocks yields the extents cut at every multiple of bs, in order, without
// building a slice: each yielded piece lies inside one block of the grid. Call
// RoundOut first to get whole blocks. bs must be positive.
func (m Map) Blocks(bs int64) iter.Seq[Extent] {
	mustBlockSize(bs)
	return func(yield func(Extent) bool) {
		for _, e := range m.ext {
			for pos, end := e.Off, e.End(); pos < end; {
				next := end
				if blockStart := pos - pos%bs; blockStart <= end-bs {
					next = min(blockStart+bs, end)
				}
				if !yield(Extent{pos, next - pos}) {
					return
				}
				pos = next
			}
		}
	}
}

func mustBlockSize(bs int64) {
	if bs <= 0 {
		panic(fmt.Sprintf("sparse: block size %d is not positive", bs))
	}
}
