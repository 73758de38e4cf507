package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sparsesync/sparsesync/sparse"
)

// ChainReader reads the volume held by a replica directory: the head
// merged with its snapshot chain, block by block as Longhorn's location map
// does. It only reads, so it works on a directory that a writer has closed
// or Longhorn stopped; it is a source for export and rebuild (ReadAt, Size,
// Map). It is safe for concurrent use; reads race with a live writer only
// as reads of a disk race with its writes.
type ChainReader struct {
	dir    string
	size   int64
	chain  []string
	layers []*os.File
}

// OpenChain opens the live chain of dir (head first) read-only, with the
// raw backing file volume.meta names (if any) as the bottom layer.
func OpenChain(dir string) (*ChainReader, error) {
	chain, vm, err := Chain(dir)
	if err != nil {
		return nil, err
	}
	c := &ChainReader{dir: dir, size: vm.Size, chain: chain}
	for _, img := range chain {
		f, err := os.Open(filepath.Join(dir, img))
		if err != nil {
			c.Close()
			return nil, err
		}
		c.layers = append(c.layers, f)
	}
	bf, err := openBacking(dir, vm)
	if err != nil {
		c.Close()
		return nil, err
	}
	if bf != nil {
		c.layers = append(c.layers, bf)
	}
	return c, nil
}

// Size returns the volume size.
func (c *ChainReader) Size() int64 { return c.size }

// Chain returns the image names, head first.
func (c *ChainReader) Chain() []string { return append([]string(nil), c.chain...) }

// ReadAt reads the volume at off (io.ReaderAt semantics: io.EOF past the end).
func (c *ChainReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: %w: read at %d", c.dir, ErrOutOfRange, off)
	}
	if off >= c.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), c.size-off))
	end := off + int64(n)
	// A layer's ranges with only holes of the volume between them are one
	// read of that layer: no layer holds data in those holes, so it reads
	// zeros there too. A read per range of 100,000 extents of 4 KiB made a
	// push of a replica wait for each in turn.
	run, rs, re := -1, int64(0), int64(0) // a pending read of layer run: [rs, re)
	flush := func() error {
		if run < 0 {
			return nil
		}
		err := readLayer(c.layers[run], p[rs-off:re-off], rs)
		run = -1
		return err
	}
	err := resolveChain(c.layers, 0, roundDown(off), min(roundUp(end), c.size), func(layer int, o, l int64) error {
		s, e := max(o, off), min(o+l, end)
		if s >= e {
			return nil
		}
		if layer < 0 {
			clear(p[s-off : e-off])
			return nil
		}
		if layer != run {
			if err := flush(); err != nil {
				return err
			}
			run, rs = layer, s
		}
		re = e
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Map returns the data extents of the volume: every 4 KiB block some layer
// of the chain holds. Everything else reads as zeros. The layers are
// walked with SEEK_DATA/SEEK_HOLE (WalkExtents); no block is read.
func (c *ChainReader) Map(ctx context.Context) (sparse.Map, error) {
	var ext []sparse.Extent
	err := c.WalkExtents(ctx, 0, func(e sparse.Extent) error {
		ext = append(ext, e)
		return nil
	})
	if err != nil {
		return sparse.Map{}, err
	}
	m, err := sparse.FromExtents(c.size, ext)
	if err != nil {
		return sparse.Map{}, fmt.Errorf("%s: %w", c.dir, err)
	}
	return m, nil
}

// WalkExtents calls fn for the volume's data extents that end after from,
// in increasing order, the first clipped to start there (as
// tcpsync.ExtentWalker asks: a push of the volume holds a window of its
// map, not all of it). The chain is resolved as the walk goes, block
// ranges of the head first and of older layers in the head's holes
// (resolveChain): the walk holds nothing.
func (c *ChainReader) WalkExtents(ctx context.Context, from int64, fn func(sparse.Extent) error) error {
	from = max(from, 0)
	var pending sparse.Extent
	err := c.resolve(ctx, roundDown(from), func(layer int, off, n int64) error {
		if layer < 0 {
			return nil
		}
		if off < from {
			off, n = from, n-(from-off)
		}
		switch {
		case n <= 0:
			return nil
		case pending.Len > 0 && pending.End() == off:
			pending.Len += n
			return nil
		case pending.Len > 0:
			if err := fn(pending); err != nil {
				return err
			}
		}
		pending = sparse.Extent{Off: off, Len: n}
		return nil
	})
	if err == nil && pending.Len > 0 {
		err = fn(pending)
	}
	return err
}

// resolve is resolveChain over the volume from from on, with ctx checked
// every few thousand ranges.
func (c *ChainReader) resolve(ctx context.Context, from int64, fn func(layer int, off, n int64) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	k := 0
	return resolveChain(c.layers, 0, from, c.size, func(layer int, off, n int64) error {
		if k++; k%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return fn(layer, off, n)
	})
}

// Extents is Map under the name tcpsync.Source uses, so a replica
// directory can be pushed as one volume (tcpsync.Push).
func (c *ChainReader) Extents(ctx context.Context) (sparse.Map, error) { return c.Map(ctx) }

// Close closes the images.
func (c *ChainReader) Close() error {
	var errs []error
	for _, f := range c.layers {
		errs = append(errs, f.Close())
	}
	c.layers = nil
	return errors.Join(errs...)
}
