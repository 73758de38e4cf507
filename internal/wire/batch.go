package wire

import (
	"encoding/binary"
	"fmt"
)

// A BATCH frame (FeatBatch) carries many small DATA ranges of the source
// in one frame, so that a file of small extents costs a frame, a tag and a
// queue hand-off per batch rather than per extent:
//
//	count u16 | count × (off u64 | len u32) | payload
//
// The payload is the ranges' bytes, concatenated in order, compressed as
// a whole when the flags name a codec (FlagCodecMask, as in DATA); its raw
// length is the sum of the lengths. The ranges ascend and never overlap.
const (
	// MaxBatchRanges is the most ranges one BATCH carries: a payload's
	// worth of the smallest blocks.
	MaxBatchRanges = MaxDataPayload / MinBlock
	// batchRangeLen is the bytes of one range in a BATCH head.
	batchRangeLen = 8 + 4
	// MaxBatchFrame is the most bytes of a BATCH body.
	MaxBatchFrame = 2 + MaxBatchRanges*batchRangeLen + MaxDataPayload
)

// Range is one of a BATCH's ranges of source bytes.
type Range struct {
	Off int64
	Len int64
}

// End is the offset just past the range.
func (r Range) End() int64 { return r.Off + r.Len }

// BatchBody is a parsed BATCH body. Parse reuses its slice, so one per
// receiving goroutine costs no allocation per frame.
type BatchBody struct {
	Ranges  []Range
	Payload []byte // as sent: compressed when the frame's flags say so
	RawLen  int    // the sum of the ranges' lengths
}

// Parse decodes a BATCH body from the peer, hostilely: at least one range
// and at most MaxBatchRanges, each of positive length inside size,
// ascending without overlap, their lengths adding up to at most
// MaxDataPayload. The payload's length against RawLen is the decoder's
// check (Decoder.Decompress), as in DATA. Anything else is ErrProtocol.
func (b *BatchBody) Parse(body []byte, size int64) error {
	d := Dec{B: body, T: Batch}
	c := d.Take(2)
	if d.Err != nil {
		return d.Err
	}
	n := int(binary.LittleEndian.Uint16(c))
	if n == 0 || n > MaxBatchRanges {
		return fmt.Errorf("%w: BATCH of %d ranges (1 to %d)", ErrProtocol, n, MaxBatchRanges)
	}
	head := d.Take(n * batchRangeLen)
	if d.Err != nil {
		return d.Err
	}
	b.Ranges, b.RawLen = b.Ranges[:0], 0
	var end int64
	for i := range n {
		p := head[i*batchRangeLen:]
		off, l, err := OffLen(Batch, binary.LittleEndian.Uint64(p), uint64(binary.LittleEndian.Uint32(p[8:])), size)
		if err != nil {
			return err
		}
		if i > 0 && off < end {
			return fmt.Errorf("%w: BATCH range at %d overlaps or precedes the one ending at %d", ErrProtocol, off, end)
		}
		if b.RawLen += int(l); b.RawLen > MaxDataPayload {
			return fmt.Errorf("%w: BATCH of more than %d bytes", ErrProtocol, MaxDataPayload)
		}
		b.Ranges = append(b.Ranges, Range{Off: off, Len: l})
		end = b.Ranges[len(b.Ranges)-1].End()
	}
	b.Payload = d.B
	return nil
}

// AppendBatchHead appends a BATCH head for ranges (at most
// MaxBatchRanges, ascending, their lengths adding up to at most
// MaxDataPayload: the sender's to keep) to b.
func AppendBatchHead(b []byte, ranges []Range) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(ranges)))
	for _, r := range ranges {
		b = binary.LittleEndian.AppendUint64(b, uint64(r.Off))
		b = binary.LittleEndian.AppendUint32(b, uint32(r.Len))
	}
	return b
}
