package replica

import (
	"github.com/sparsesync/sparsesync/qos"

	"context"
	"fmt"
	"time"

	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/sparse"
)

// ExportStats say what Export did.
type ExportStats struct {
	// Size is the volume size (the image's apparent size).
	Size int64 `json:"size"`
	// DataBytes is the volume's data: the 4 KiB blocks some layer holds,
	// all of them read and written.
	DataBytes int64 `json:"data_bytes"`
	// Layers is the length of the chain (head included).
	Layers int `json:"layers"`
	// Elapsed is the wall time.
	Elapsed time.Duration `json:"-"`
}

// exportBuf is the read/write unit of Export.
const exportBuf = 1 << 20

// ExportOptions are Export's options; nil means the defaults.
type ExportOptions struct {
	// Budget bounds the bytes per second Export reads from the replica's
	// images and writes to dst (package qos); the zero Budget is unlimited.
	Budget qos.Budget
}

// Export writes the volume held by the replica directory dir (ours or
// Longhorn's) into the sparse image dst: the head merged with its snapshot
// chain, the newest layer winning per 4 KiB block, holes left as holes.
// Only the data extents are read, so the time is proportional to the data,
// not to the volume size. A regular-file dst is written to a temporary file
// that replaces dst, synced, only when complete; a block device is written
// in place and its holes are zeroed.
func Export(ctx context.Context, dir, dst string, opts *ExportOptions) (ExportStats, error) {
	start := time.Now()
	var o ExportOptions
	if opts != nil {
		o = *opts
	}
	c, err := OpenChain(dir)
	if err != nil {
		return ExportStats{}, err
	}
	defer c.Close()
	owners, err := c.owners(ctx)
	if err != nil {
		return ExportStats{}, err
	}
	st := ExportStats{Size: c.size, Layers: len(c.layers)}
	t, err := target.Create(dst, &target.Options{Atomic: true})
	if err != nil {
		return st, err
	}
	if err := exportTo(ctx, c, owners, t, &st, o.Budget); err != nil {
		t.Abort()
		return st, err
	}
	if err := t.Commit(true); err != nil {
		return st, err
	}
	st.Elapsed = time.Since(start)
	return st, nil
}

func exportTo(ctx context.Context, c *ChainReader, owners []sparse.Map, t *target.File, st *ExportStats, budget qos.Budget) error {
	if err := t.SetSize(c.size); err != nil {
		return err
	}
	var data sparse.Map
	buf := alignedBuf(exportBuf)
	for i, m := range owners {
		if i == 0 {
			data = m
		} else {
			data = data.Union(m)
		}
		for _, e := range m.Extents() {
			for off := e.Off; off < e.End(); {
				if err := ctx.Err(); err != nil {
					return err
				}
				n := min(int64(len(buf)), e.End()-off)
				for _, l := range []*qos.Limiter{budget.Read, budget.Write} {
					if p := l.Piece(); p > 0 {
						n = min(n, max(p, BlockSize)) // one piece at a time: a steady rate
					}
				}
				b := buf[:n]
				if err := budget.Read.Wait(ctx, n); err != nil {
					return err
				}
				if err := readLayer(c.layers[i], b, off); err != nil {
					return err
				}
				if err := budget.Write.Wait(ctx, n); err != nil {
					return err
				}
				if _, err := t.WriteAt(b, off); err != nil {
					return err
				}
				off += int64(len(b))
			}
		}
	}
	st.DataBytes = data.Bytes()
	if t.BlockDevice() {
		for _, h := range data.Holes().Extents() {
			if _, err := t.Zero(h.Off, h.Len); err != nil {
				return err
			}
		}
	}
	return nil
}

// owners returns, per layer (head first), the 4 KiB blocks that layer
// provides: the blocks where it has any data allocated and no newer layer
// has. The maps are disjoint; their union is the volume's data. Each layer
// is walked once with sparse.Walker (SEEK_DATA/SEEK_HOLE); nothing is read.
func (c *ChainReader) owners(ctx context.Context) ([]sparse.Map, error) {
	remaining, err := sparse.NewMap(c.size, sparse.Extent{Off: 0, Len: c.size})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.dir, err)
	}
	out := make([]sparse.Map, len(c.layers))
	for i, f := range c.layers {
		w, err := sparse.NewWalker(f)
		if err != nil {
			return nil, err
		}
		m, err := w.Map(ctx)
		if err != nil {
			return nil, err
		}
		m = m.Resize(c.size).RoundOut(BlockSize)
		out[i] = m.Intersect(remaining)
		remaining = remaining.Difference(out[i])
	}
	return out, nil
}
