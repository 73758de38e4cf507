package replica

import (
	"github.com/sparsesync/sparsesync/qos"

	"context"
	"os"
	"time"

	"github.com/sparsesync/sparsesync/internal/target"
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
	st := ExportStats{Size: c.size, Layers: len(c.layers)}
	t, err := target.Create(dst, &target.Options{Atomic: true})
	if err != nil {
		return st, err
	}
	if err := exportTo(ctx, c, t, &st, o.Budget); err != nil {
		t.Abort()
		return st, err
	}
	if err := t.Commit(true); err != nil {
		return st, err
	}
	st.Elapsed = time.Since(start)
	return st, nil
}

// exportTo writes the volume into t as the chain resolves it, in file
// order (ChainReader.resolve): each range from the layer that holds it,
// holes left as holes (zeroed on a block device). It holds no map.
func exportTo(ctx context.Context, c *ChainReader, t *target.File, st *ExportStats, budget qos.Budget) error {
	if err := t.SetSize(c.size); err != nil {
		return err
	}
	buf := alignedBuf(exportBuf)
	return c.resolve(ctx, 0, func(layer int, off, n int64) error {
		if layer < 0 {
			if t.BlockDevice() {
				_, err := t.Zero(off, n)
				return err
			}
			return nil
		}
		st.DataBytes += n
		return exportRange(ctx, c.layers[layer], t, buf, off, off+n, budget)
	})
}

// exportRange copies [off, end) of layer into t through buf, a budget's
// piece at a time.
func exportRange(ctx context.Context, layer *os.File, t *target.File, buf []byte, off, end int64, budget qos.Budget) error {
	for off < end {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(int64(len(buf)), end-off)
		for _, l := range []*qos.Limiter{budget.Read, budget.Write} {
			if p := l.Piece(); p > 0 {
				n = min(n, max(p, BlockSize)) // one piece at a time: a steady rate
			}
		}
		b := buf[:n]
		if err := budget.Read.Wait(ctx, n); err != nil {
			return err
		}
		if err := readLayer(layer, b, off); err != nil {
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
	return nil
}
