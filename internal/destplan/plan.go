package destplan

import (
	"errors"
	"fmt"

	"github.com/sparsesync/sparsesync/sparse"
)

// growPage is the span a filesystem may allocate at a destination's old,
// unaligned end when the file grows: its last page (btrfs writes zeros
// into it even where it was a hole; ext4 and XFS keep the partial block).
const growPage = 4096

// ErrInvalidInput is returned for a unit that is not a positive power of
// two.
var ErrInvalidInput = errors.New("destplan: invalid input")

// Input is what the plan is made of; see the package doc.
type Input struct {
	// Src is the source's data; its size is the source's size.
	Src sparse.Map
	// Dst is the destination's data as walked, at the size it had then.
	Dst sparse.Map
	// DstHolesUnknown says the destination cannot tell its holes (a
	// block device): all of Dst's size counts as data.
	DstHolesUnknown bool
	// Hidden is the destination's hidden allocation: allocated ranges the
	// walk called holes. It may be empty (the zero Map).
	Hidden sparse.Map
	// Keep is the source's own hidden allocation: the destination's is
	// not punched there. It may be empty.
	Keep sparse.Map
	// Unit is the compare unit, a power of two; 1 compares exact bytes.
	Unit int64
}

// Plan says how to turn the destination into a copy of the source. All maps
// have the source's size.
type Plan struct {
	// Size is the destination's new size, the source's.
	Size int64
	// Resize says the destination's size is not Size yet.
	Resize bool
	// Data is the source's data rounded out to whole units.
	Data sparse.Map
	// Compare is the units of Data the destination holds data in at the
	// same unit length: read both, write the source's data where they
	// differ.
	Compare sparse.Map
	// Punch is where the destination must be made to read as zeros (a
	// hole) before any data is written: exact to the source's holes.
	Punch sparse.Map
	// Held is where the destination may hold data once resized: a range
	// of the source's data that is all zeros need only be punched where
	// it meets Held.
	Held sparse.Map

	src sparse.Map
}

// Copy returns the source's data outside Compare: what is written without
// reading the destination. It is computed when asked for: tcpsync sends
// the blocks of Data outside Compare and writes only their source data,
// which is the same ranges, without building the map.
func (p Plan) Copy() sparse.Map { return p.src.Difference(p.Compare) }

// Make computes the plan. It fails only on a bad Unit or a negative size.
func Make(in Input) (Plan, error) {
	u := in.Unit
	if u <= 0 || u&(u-1) != 0 {
		return Plan{}, fmt.Errorf("%w: compare unit %d is not a power of two", ErrInvalidInput, u)
	}
	s, d := in.Src.Size(), in.Dst.Size()
	dst := in.Dst
	if in.DstHolesUnknown {
		all, err := sparse.NewMap(d, sparse.Extent{Len: d})
		if err != nil {
			return Plan{}, err
		}
		dst = all
	}
	dstIn := dst.Resize(s)
	held := dstIn
	if d < s && d%growPage != 0 {
		at := d - d%growPage
		page, err := sparse.NewMap(s, sparse.Extent{Off: at, Len: min(growPage, s-at)})
		if err != nil {
			return Plan{}, err
		}
		held = held.Union(page)
	}
	limit := min(s, d)
	if d != s {
		limit -= limit % u
	}
	p := Plan{Size: s, Resize: d != s, Data: in.Src.RoundOut(u), Held: held, src: in.Src}
	p.Compare = p.Data.Intersect(dstIn.RoundOut(u).Resize(limit)) // of size s, as Data
	p.Punch = held.Union(in.Hidden.Resize(s).Difference(in.Keep.Resize(s))).Intersect(in.Src.Holes())
	return p, nil
}
