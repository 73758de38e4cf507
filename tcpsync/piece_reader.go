package tcpsync

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// pieceReader reads pieces: a piece's data extents packed into a buffer
// (their total length), for the manifest, FETCH answers and the client's
// read-back. Extents less than sparse.ReadGap apart are read as one span,
// holes and all (a hole reads as zeros without I/O), into span and copied
// out, as the sender reads a chunk (pieces): a piece of 4 KiB extents
// costs a read per MiB, not one per extent. One read at a time of 100,000
// extents of 4 KiB kept the disk at a queue depth of one, and a pull of
// them from one source took 14 s where a pull without pieces took 6 s.
type pieceReader struct {
	buf   []byte // a piece's data
	span  []byte // wire.MaxDataPayload, aligned for a direct read; made on first use
	short shortRead
}

// newPieceReader returns a pieceReader for pieces of up to n bytes of the
// file sh names.
func newPieceReader(n int64, sh shortRead) *pieceReader {
	return &pieceReader{buf: make([]byte, n), short: sh}
}

// read reads ext, n bytes in all, from r and returns them packed,
// charging each read's data bytes to budget first if it is set. The bytes
// are the reader's until its next read.
func (p *pieceReader) read(ctx context.Context, r io.ReaderAt, ext []sparse.Extent, n int64, budget func(int64) error) ([]byte, error) {
	var sum int64
	for _, e := range ext {
		sum += e.Len
	}
	if sum != n || n > int64(len(p.buf)) {
		return nil, fmt.Errorf("internal: a piece of %d bytes in extents of %d for a buffer of %d", n, sum, len(p.buf))
	}
	buf := p.buf[:n]
	var at int64
	for _, pc := range sparse.Spans(ext, wire.MaxDataPayload) {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		data := pc.Data()
		if budget != nil {
			if err := budget(data); err != nil {
				return nil, err
			}
		}
		if len(pc.Ext) == 1 {
			if err := readExact(r, buf[at:at+data], pc.Off, p.short); err != nil {
				return nil, err
			}
			at += data
			continue
		}
		if p.span == nil {
			p.span = coldread.AlignedBuffer(wire.MaxDataPayload)
		}
		if err := readExact(r, p.span[:pc.End-pc.Off], pc.Off, p.short); err != nil {
			return nil, err
		}
		for _, e := range pc.Ext {
			at += int64(copy(buf[at:at+e.Len], p.span[e.Off-pc.Off:]))
		}
	}
	return buf, nil
}

// shortRead says what a read is of and what it means when the file ends
// before the read does: the source shrank (ErrSourceChanged), or the
// target read back did (ErrVerify).
type shortRead struct {
	name string
	err  error
}

// sourceShort is a short read of the file being sent or served.
var sourceShort = shortRead{"the source", ErrSourceChanged}

// readExact reads len(b) bytes of r at off, the one exact read of
// tcpsync's files: a short read is sh.err, any other failure is wrapped
// with sh.name and the offset.
func readExact(r io.ReaderAt, b []byte, off int64, sh shortRead) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: short read of %d bytes at %d (got %d): %s shrank", sh.err, len(b), off, n, sh.name)
	}
	return fmt.Errorf("reading %s at %d: %w", sh.name, off, err)
}
