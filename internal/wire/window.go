package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/sparsesync/sparsesync/sparse"
)

// MaxWindowMap is the most a WINDOW frame's map may take (its body less lo
// and hi); a longer one is refused before it is decoded.
const MaxWindowMap = 32 << 10

// UvarintLen is the length of v's encoding as a uvarint.
func UvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// WindowMapLen is the encoded size of a map of size hi holding ext.
func WindowMapLen(ext []sparse.Extent, hi int64) int {
	n := 1 + UvarintLen(uint64(hi)) + UvarintLen(uint64(len(ext)))
	var prev int64
	for _, e := range ext {
		n += UvarintLen(uint64(e.Off-prev)) + UvarintLen(uint64(e.Len))
		prev = e.End()
	}
	return n
}

// WindowFrame is a WINDOW body: lo, hi and the map of size hi holding ext.
func WindowFrame(lo, hi int64, ext []sparse.Extent) ([]byte, error) {
	m, err := sparse.NewMap(hi, ext...)
	if err != nil {
		return nil, err
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(lo))
	b = binary.LittleEndian.AppendUint64(b, uint64(hi))
	return m.AppendBinary(b)
}

// ParseWindow decodes a WINDOW body from the peer: the window must start at
// lo (windows come in order, none overlapping or skipped), end after it
// within most, at a multiple of bs unless at most, and its extents lie in
// it. The map's length is bounded by the frame's (64 KiB): decoding it
// allocates no more than that justifies. It returns the window's end and
// its extents.
func ParseWindow(body []byte, lo, most, bs int64) (int64, []sparse.Extent, error) {
	d := Dec{B: body, T: Window}
	wlo, whi := d.U64(), d.U64()
	if d.Err != nil {
		return 0, nil, d.Err
	}
	if wlo != uint64(lo) || whi <= wlo || whi > uint64(most) || (whi%uint64(bs) != 0 && whi != uint64(most)) {
		return 0, nil, fmt.Errorf("%w: WINDOW [%d,%d), expected one from %d to at most %d at a multiple of %d",
			ErrProtocol, wlo, whi, lo, most, bs)
	}
	if len(d.B) > MaxWindowMap {
		return 0, nil, fmt.Errorf("%w: WINDOW map of %d bytes (limit %d)", ErrProtocol, len(d.B), MaxWindowMap)
	}
	m, err := sparse.DecodeMap(d.B)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: WINDOW map: %w", ErrProtocol, err)
	}
	hi := int64(whi)
	if m.Size() != hi || (m.Len() > 0 && m.Extents()[0].Off < lo) {
		return 0, nil, fmt.Errorf("%w: WINDOW map of size %d with extents outside [%d,%d)", ErrProtocol, m.Size(), lo, hi)
	}
	return hi, m.Extents(), nil
}
