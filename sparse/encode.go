package sparse

import (
	"encoding/binary"
	"fmt"
	"math"
)

// encodingVersion is the first byte of an encoded map.
const encodingVersion = 1

// The binary form of a map is
//
//	version  byte (1)
//	size     uvarint
//	count    uvarint
//	count × (gap uvarint, length uvarint)
//
// where gap is the distance from the previous extent's end (from 0 for the
// first). Varints must be minimal, gaps after the first positive, lengths
// positive, everything within the size, and nothing may follow the last
// extent: a valid map has exactly one encoding.

// AppendBinary appends the binary form of m to b (encoding.BinaryAppender).
func (m Map) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, encodingVersion)
	b = binary.AppendUvarint(b, uint64(m.size))
	b = binary.AppendUvarint(b, uint64(len(m.ext)))
	var prevEnd int64
	for _, e := range m.ext {
		b = binary.AppendUvarint(b, uint64(e.Off-prevEnd))
		b = binary.AppendUvarint(b, uint64(e.Len))
		prevEnd = e.End()
	}
	return b, nil
}

// MarshalBinary returns the binary form of m.
func (m Map) MarshalBinary() ([]byte, error) {
	return m.AppendBinary(make([]byte, 0, 1+2*binary.MaxVarintLen64+len(m.ext)*4))
}

// UnmarshalBinary decodes a map strictly, replacing *m. It never allocates
// more than the input's length justifies: every extent takes at least two
// bytes, so the count is checked against the bytes left before allocating.
func (m *Map) UnmarshalBinary(b []byte) error {
	d, err := DecodeMap(b)
	if err != nil {
		return err
	}
	*m = d
	return nil
}

// DecodeMap decodes the binary form of a map. Errors match ErrInvalidMap and
// say what is wrong and where.
func DecodeMap(b []byte) (Map, error) {
	if len(b) == 0 {
		return Map{}, &mapError{cause: ErrTruncated, index: -1, msg: "empty input"}
	}
	if b[0] != encodingVersion {
		return Map{}, &mapError{cause: ErrMalformed, index: -1, msg: fmt.Sprintf("unknown version %d", b[0])}
	}
	r := reader{b: b[1:]}
	size, err := r.uvarint("size", -1)
	if err != nil {
		return Map{}, err
	}
	if size > math.MaxInt64 {
		return Map{}, &mapError{cause: ErrOutOfRange, index: -1, msg: fmt.Sprintf("size %d overflows int64", size)}
	}
	count, err := r.uvarint("count", -1)
	if err != nil {
		return Map{}, err
	}
	if count > uint64(len(r.b)/2) {
		return Map{}, &mapError{cause: ErrTruncated, index: -1, msg: fmt.Sprintf("count %d needs more than the %d bytes left", count, len(r.b))}
	}
	m := Map{size: int64(size)}
	if count > 0 {
		m.ext = make([]Extent, 0, count)
	}
	var prevEnd uint64
	for i := range int(count) {
		gap, err := r.uvarint("gap", i)
		if err != nil {
			return Map{}, err
		}
		length, err := r.uvarint("length", i)
		if err != nil {
			return Map{}, err
		}
		switch {
		case i > 0 && gap == 0:
			return Map{}, &mapError{cause: ErrNotCoalesced, index: i, msg: "zero gap after the previous extent"}
		case length == 0:
			return Map{}, &mapError{cause: ErrOutOfRange, index: i, msg: "zero length"}
		case gap > size-prevEnd || length > size-prevEnd-gap:
			return Map{}, &mapError{cause: ErrOutOfRange, index: i, msg: fmt.Sprintf("gap %d length %d after %d ends past size %d", gap, length, prevEnd, size)}
		}
		off := prevEnd + gap
		m.ext = append(m.ext, Extent{int64(off), int64(length)})
		prevEnd = off + length
	}
	if len(r.b) != 0 {
		return Map{}, &mapError{cause: ErrMalformed, index: -1, msg: fmt.Sprintf("%d trailing bytes", len(r.b))}
	}
	return m, nil
}

type reader struct{ b []byte }

func (r *reader) uvarint(what string, index int) (uint64, error) {
	v, n := binary.Uvarint(r.b)
	switch {
	case n == 0:
		return 0, &mapError{cause: ErrTruncated, index: index, msg: "input ends inside " + what}
	case n < 0:
		return 0, &mapError{cause: ErrMalformed, index: index, msg: what + " overflows 64 bits"}
	case n > 1 && r.b[n-1] == 0:
		return 0, &mapError{cause: ErrMalformed, index: index, msg: what + " is not a minimal varint"}
	}
	r.b = r.b[n:]
	return v, nil
}
