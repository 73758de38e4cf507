package tcpsync

import (
	"fmt"

	"github.com/pierrec/lz4/v4"
	"github.com/sparsesync/sparsesync/internal/wire"
)

// batchIn is the apply goroutine's state for BATCH frames, reused from
// frame to frame.
type batchIn struct {
	body wire.BatchBody
	st   []*rstate // each range's chunk
}

// onBatch applies a BATCH frame (wire.FeatBatch): every range is checked
// as a DATA frame's is (block-aligned, inside a chunk being sent, in
// order, clear of or inside the compare blocks) before any byte of the
// frame is written.
func (r *receiver) onBatch(flags uint8, body []byte) error {
	if !r.f.batch {
		return fmt.Errorf("%w: BATCH, which this side did not agree to", ErrProtocol)
	}
	if r.plan == nil {
		return fmt.Errorf("%w: BATCH before any WINDOW", ErrProtocol)
	}
	b := &r.batch
	if err := b.body.Parse(body, r.plan.size); err != nil {
		return err
	}
	b.st = b.st[:0]
	for _, rg := range b.body.Ranges {
		_, _, st, _, err := r.span(wire.Batch, uint64(rg.Off), uint64(rg.Len))
		if err != nil {
			return err
		}
		b.st = append(b.st, st)
	}
	if r.scratch == nil && flags&wire.FlagCodecMask != 0 {
		r.scratch = make([]byte, max(wire.MaxDataPayload, lz4.CompressBlockBound(wire.MaxDataPayload)))
	}
	raw, err := r.dec.Decompress(flags, b.body.Payload, b.body.RawLen, r.scratch)
	if err != nil {
		return err
	}
	for i, rg := range b.body.Ranges {
		if err := r.applyData(raw[:rg.Len], rg.Off, b.st[i]); err != nil {
			return err
		}
		raw = raw[rg.Len:]
	}
	return nil
}
