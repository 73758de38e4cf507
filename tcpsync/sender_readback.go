package tcpsync

import (
	"context"

	"github.com/sparsesync/sparsesync/sparse"
)

// prefixDigest reads the source's chunks below first (those a resume
// skips) and returns their digest, computed as produce does, so a
// read-back sync's DONE covers the whole file.
func (s *sender) prefixDigest(ctx context.Context, first int) (digest, error) {
	var total digest
	buf := make([]byte, maxDataPayload)
	bs := s.p.bs
	dk := newDigestKey(s.p.seed)
	for k := range first {
		for _, pc := range pieces(s.plan.chunk(k).ext, s.readPiece()) {
			if err := ctx.Err(); err != nil {
				return total, context.Cause(ctx)
			}
			b := buf[:pc.end-pc.start]
			if err := s.f.m.read(pc.end - pc.start); err != nil {
				return total, err
			}
			if err := readFull(s.src, b, pc.start); err != nil {
				return total, err
			}
			for _, se := range pc.ext {
				lo, hi := se.Off-pc.start, se.End()-pc.start
				for p := lo; p < hi; p += bs {
					if blk := b[p:min(p+bs, hi)]; !sparse.IsZero(blk) {
						total.addBlock(dk, pc.start+p, blk)
					}
				}
			}
		}
	}
	return total, nil
}
