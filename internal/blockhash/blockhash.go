// Package blockhash hashes fixed-size blocks of a file with seeded xxhash64:
// the comparison localsync and tcpsync both use to find the blocks that
// differ between two copies without sending or writing the equal ones.
package blockhash

import (
	"context"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"

	"github.com/sparsesync/sparsesync/sparse"
)

// Hasher hashes blocks with one seed. It reuses its state, so it allocates
// nothing per block; it is not safe for concurrent use (make one per goroutine).
type Hasher struct {
	d    *xxhash.Digest
	seed uint64
}

// New returns a hasher seeded with seed. Network peers derive the seed from
// their session so that a crafted collision cannot hide a change.
func New(seed uint64) *Hasher { return &Hasher{d: xxhash.NewWithSeed(seed), seed: seed} }

// Sum returns the seeded xxhash64 of b.
func (h *Hasher) Sum(b []byte) uint64 {
	h.d.ResetWithSeed(h.seed)
	h.d.Write(b)
	return h.d.Sum64()
}

// Walk reads the blocks of r that m covers, rounded out to bs (the last block
// of the map's size may be short), and calls fn with each block's offset, its
// bytes and its hash. buf is the read buffer: its length, rounded down to a
// multiple of bs, is how much is read per call, so pass at least bs bytes
// (1 MiB is a good size). The data slice passed to fn is only valid during
// the call. ctx is checked once per read.
func (h *Hasher) Walk(ctx context.Context, r io.ReaderAt, m sparse.Map, bs int64, buf []byte, fn func(off int64, data []byte, sum uint64) error) error {
	chunk := int64(len(buf)) / bs * bs
	if chunk == 0 {
		return fmt.Errorf("blockhash: buffer of %d bytes is smaller than the block size %d", len(buf), bs)
	}
	for _, e := range m.RoundOut(bs).Extents() {
		for off := e.Off; off < e.End(); {
			if err := ctx.Err(); err != nil {
				return err
			}
			n := min(chunk, e.End()-off)
			got, err := r.ReadAt(buf[:n], off)
			if int64(got) < n {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return fmt.Errorf("blockhash: read %d bytes at %d: %w", n, off, err)
			}
			for p := int64(0); p < n; p += bs {
				b := buf[p:min(p+bs, n)]
				if err := fn(off+p, b, h.Sum(b)); err != nil {
					return err
				}
			}
			off += n
		}
	}
	return nil
}
