package replica

import (
	"context"
	"time"

	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/qos"
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

	// faults, tests only, records or fails the target's operations.
	faults *target.Faults
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
	t, err := target.Create(dst, &target.Options{Atomic: true, Faults: o.faults})
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
// holes left as holes (zeroed on a block device). It holds no map: the
// ranges of one layer are gathered a few at a time (exporter) and read a
// span at a time.
func exportTo(ctx context.Context, c *ChainReader, t *target.File, st *ExportStats, budget qos.Budget) error {
	if err := t.SetSize(c.size); err != nil {
		return err
	}
	e := &exporter{c: c, t: t, buf: alignedBuf(exportBuf), budget: budget}
	err := c.resolve(ctx, 0, func(layer int, off, n int64) error {
		if layer < 0 {
			if !t.BlockDevice() {
				return nil
			}
			if err := e.flush(ctx); err != nil {
				return err
			}
			_, err := t.Zero(off, n)
			return err
		}
		st.DataBytes += n
		if layer != e.layer || len(e.pend) == exportPending {
			if err := e.flush(ctx); err != nil {
				return err
			}
			e.layer = layer
		}
		e.pend = append(e.pend, sparse.Extent{Off: off, Len: n})
		return nil
	})
	if err == nil {
		err = e.flush(ctx)
	}
	return err
}

// exportPending is how many ranges of one layer exportTo gathers before it
// copies them.
const exportPending = 1024

// exporter copies gathered ranges of one layer into the target.
type exporter struct {
	c      *ChainReader
	t      *target.File
	buf    []byte
	budget qos.Budget
	layer  int
	pend   []sparse.Extent // ranges of layer, in file order
}

// flush copies the gathered ranges through buf, a span at a time
// (sparse.Spans: neighbours less than sparse.ReadGap apart in one read;
// a read of 100,000 extents of 4 KiB one at a time kept the disk at a
// queue depth of one), each a budget's piece at most; each range is
// allocated ahead where the target's filesystem wants that
// (target.File.AllocateAhead: ext4, small extents) and written alone, so
// holes stay holes.
func (e *exporter) flush(ctx context.Context) error {
	if len(e.pend) == 0 {
		return nil
	}
	pend := e.pend
	e.pend = e.pend[:0]
	most := int64(len(e.buf))
	for _, l := range []*qos.Limiter{e.budget.Read, e.budget.Write} {
		if p := l.Piece(); p > 0 {
			most = min(most, max(p, BlockSize)) // one piece at a time: a steady rate
		}
	}
	layer := e.c.layers[e.layer]
	j := 0 // the gathered range the next piece is cut from
	for _, sp := range sparse.Spans(pend, most) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := e.budget.Read.Wait(ctx, sp.Data()); err != nil {
			return err
		}
		b := e.buf[:sp.End-sp.Off]
		if err := readLayer(layer, b, sp.Off); err != nil {
			return err
		}
		for _, x := range sp.Ext {
			for pend[j].End() <= x.Off {
				j++
			}
			if err := e.budget.Write.Wait(ctx, x.Len); err != nil {
				return err
			}
			e.t.AllocateAhead(x.Off, x.Len, pend[j].Len)
			if _, err := e.t.WriteAt(b[x.Off-sp.Off:x.End()-sp.Off], x.Off); err != nil {
				return err
			}
		}
	}
	return nil
}
