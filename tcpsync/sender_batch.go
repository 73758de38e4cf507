package tcpsync

import (
	"context"

	"github.com/pierrec/lz4/v4"
	"github.com/sparsesync/sparsesync/internal/wire"
)

// batchOut gathers the data runs of one read (a piece) for a BATCH frame
// (wire.FeatBatch): a file of small extents then costs a frame, a tag and
// a hand-off to the writer per read rather than per extent. The runs
// point into the piece's buffer; nothing is copied unless compressed.
type batchOut struct {
	pb     *pbuf
	ranges []wire.Range
	parts  [][]byte
	raw    int
}

// addData queues the data run raw (the source's bytes at off, in pb): in
// the pending batch when the peer takes BATCH frames, else as DATA.
func (s *sender) addData(ctx context.Context, pb *pbuf, raw []byte, off int64, codec Compression) error {
	if !s.f.batch {
		return s.sendData(ctx, &s.encoder, pb, raw, off, codec)
	}
	b := &s.batch
	if len(b.ranges) == wire.MaxBatchRanges || b.raw+len(raw) > wire.MaxDataPayload || (b.pb != nil && b.pb != pb) {
		if err := s.flushBatch(ctx, codec); err != nil {
			return err
		}
	}
	b.pb = pb
	b.ranges = append(b.ranges, wire.Range{Off: off, Len: int64(len(raw))})
	b.parts = append(b.parts, raw)
	b.raw += len(raw)
	return nil
}

// flushBatch sends the pending runs: one alone as DATA, more as a BATCH
// (compressed as a whole when codec asks and it pays). It must run
// before anything else is queued after them (the receiver takes ranges in
// order) and before the piece's buffer is released.
func (s *sender) flushBatch(ctx context.Context, codec Compression) error {
	b := &s.batch
	defer func() { b.pb, b.ranges, b.parts, b.raw = nil, b.ranges[:0], b.parts[:0], 0 }()
	switch len(b.ranges) {
	case 0:
		return nil
	case 1:
		return s.sendData(ctx, &s.encoder, b.pb, b.parts[0], b.ranges[0].Off, codec)
	}
	o := s.q.frame(wire.Batch)
	o.ext = wire.AppendBatchHead(o.ext, b.ranges)
	s.copied.Add(int64(b.raw))
	if s.p.progress != nil {
		s.p.progress.Done.Add(int64(b.raw))
	}
	if codec == CompressLZ4 || codec == CompressZstd {
		sent, err := s.compressBatch(ctx, o, codec)
		if err != nil || sent {
			return err
		}
	}
	b.pb.ref()
	o.buf = b.pb
	o.parts = append(o.parts, b.parts...)
	return s.q.put(ctx, o)
}

// compressBatch gathers the batch's runs and queues o with them
// compressed, if that pays; false when it does not (o is then untouched).
func (s *sender) compressBatch(ctx context.Context, o *outFrame, codec Compression) (bool, error) {
	b := &s.batch
	gb, err := s.pool.get(ctx)
	if err != nil {
		return false, err
	}
	defer gb.unref()
	raw := gb.b[:0]
	for _, p := range b.parts {
		raw = append(raw, p...)
	}
	cb, err := s.pool.get(ctx)
	if err != nil {
		return false, err
	}
	if need := lz4.CompressBlockBound(len(raw)); cap(cb.b) < need {
		cb.b = make([]byte, need)
	}
	out, fl := s.encoder.compress(codec, raw, cb.b[:0:cap(cb.b)])
	if fl == 0 {
		cb.unref()
		return false, nil
	}
	o.flags, o.payload, o.buf = fl, out, cb
	return true, s.q.put(ctx, o)
}
