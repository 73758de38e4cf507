package sparse

// ReadGap is the largest hole read through to join two extents in one
// read: a hole reads as zeros without I/O, and one read of neighbouring
// small extents lets the kernel queue all their requests at once where a
// read per extent waits for each in turn.
const ReadGap = 64 << 10

// Span is one read: [Off, End) covers Ext, data extents in file order and
// the holes (of at most ReadGap) between them.
type Span struct {
	Off, End int64
	Ext      []Extent
}

// Data is the bytes of s's extents: what a read of s takes from storage
// (its holes read as zeros without I/O), and what a read budget is
// charged for it.
func (s Span) Data() int64 {
	var n int64
	for _, e := range s.Ext {
		n += e.Len
	}
	return n
}

// Spans cuts ext (sorted, not overlapping) into reads of at most most
// bytes: an extent longer than most into pieces of most, neighbours less
// than ReadGap apart joined into one read while it stays within most.
func Spans(ext []Extent, most int64) []Span {
	var out []Span
	for _, e := range ext {
		for off := e.Off; off < e.End(); {
			n := min(e.End()-off, most)
			sub := Extent{Off: off, Len: n}
			if k := len(out) - 1; k >= 0 && off-out[k].End <= ReadGap && off+n-out[k].Off <= most {
				out[k].Ext = append(out[k].Ext, sub)
				out[k].End = off + n
			} else {
				out = append(out, Span{Off: off, End: off + n, Ext: []Extent{sub}})
			}
			off += n
		}
	}
	return out
}
