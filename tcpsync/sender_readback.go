package tcpsync

import (
	"context"

	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// prefixDigest reads the source's chunks below first (those a resume
// skips; with wire.FeatWindows, its data below the resume offset, a window at
// a time) and returns their digest, computed as produce does, so a
// read-back sync's DONE covers the whole file.
func (s *sender) prefixDigest(ctx context.Context, first int) (digest, error) {
	var total digest
	buf := make([]byte, wire.MaxDataPayload)
	if !s.f.windows {
		for k := range first {
			d, err := s.digestBlocks(ctx, s.plan.chunk(k).ext, buf)
			if err != nil {
				return total, err
			}
			total.add(d)
		}
		return total, nil
	}
	for lo := int64(0); lo < s.resume; {
		ext, hi, err := s.sourceWindow(ctx, lo, s.resume)
		if err != nil {
			return total, err
		}
		m, err := sparse.NewMap(hi, ext...)
		if err != nil {
			return total, err
		}
		d, err := s.digestBlocks(ctx, m.RoundOut(s.p.bs).Extents(), buf)
		if err != nil {
			return total, err
		}
		total.add(d)
		lo = hi
	}
	return total, nil
}

// digestBlocks reads the source's blocks ext and returns their digest.
func (s *sender) digestBlocks(ctx context.Context, ext []sparse.Extent, buf []byte) (digest, error) {
	var total digest
	bs := s.p.bs
	dk := newDigestKey(s.p.seed)
	for _, pc := range sparse.Spans(ext, s.readPiece()) {
		if err := ctx.Err(); err != nil {
			return total, context.Cause(ctx)
		}
		b := buf[:pc.End-pc.Off]
		if err := s.f.m.read(pc.Data()); err != nil {
			return total, err
		}
		if err := readExact(s.src, b, pc.Off, sourceShort); err != nil {
			return total, err
		}
		for _, se := range pc.Ext {
			lo, hi := se.Off-pc.Off, se.End()-pc.Off
			for p := lo; p < hi; p += bs {
				if blk := b[p:min(p+bs, hi)]; !sparse.IsZero(blk) {
					total.addBlock(dk, pc.Off+p, blk)
				}
			}
		}
	}
	return total, nil
}
