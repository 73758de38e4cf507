package localsync

import (
	"context"
	"fmt"
	"io/fs"
	"os"

	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/sparse"
)

// dstSide is what the windows need to know about the destination.
type dstSide struct {
	w       *sparse.Walker // walks its data; nil: it holds none (new or empty)
	all     bool           // a block device: all of it is data
	mayHide bool           // its allocation exceeds its data: look for hidden preallocations
}

// run copies w's file (src) into t following opts; see Copy. It holds a
// window of each file's map at a time (copyWindows), whatever the extent
// count. With a progress callback, a first walk that holds nothing counts
// the source's data for the progress total; without, the windows count it.
func run(ctx context.Context, w *sparse.Walker, src *os.File, t *target.File, opts *Options, dg *digests) (Stats, error) {
	info := w.Info()
	var data int64
	var err error
	if opts.Progress != nil {
		data, _, err = w.Tally(ctx)
	} else {
		_, _, err = w.Window(ctx, 0, info.Size, 1) // whether the filesystem knows the holes
	}
	if err != nil {
		return Stats{}, err
	}
	zeroScan := opts.DetectZeros || !w.HolesKnown()
	e := &engine{
		ctx: ctx, opts: opts, log: opts.Logger, src: src, dst: t,
		size: info.Size, bs: opts.BlockSize, total: data, counted: opts.Progress != nil,
		zeroScan: zeroScan, dg: dg,
		// Ranges SEEK_DATA calls data only because zero pages are cached
		// over unwritten space (XFS) are holes: see sparse.UnstoredZeros.
		unstored: !zeroScan && !info.BlockDevice,
		gate:     make(chan struct{}, 1),
	}
	e.allowClone = !e.zeroScan && mayClone(opts, w) && !t.BlockDevice()
	e.cloneOnly = opts.Method == MethodReflink || opts.Reflink == ReflinkAlways
	// copy_file_range shares blocks on XFS and btrfs, so "never" skips it
	// unless it was asked for by name.
	e.allowCFR = !e.zeroScan && !e.cloneOnly &&
		((opts.Method == MethodAuto && opts.Reflink != ReflinkNever) || opts.Method == MethodCopyRange)
	e.allowRW = e.zeroScan || (!e.cloneOnly && (opts.Method == MethodAuto || opts.Method == MethodReadWrite))
	e.coldRW = e.allowCFR && e.allowRW && opts.Method == MethodAuto && t.CopyRangeCopies()
	if e.cloneOnly && !e.allowClone {
		return e.stats(), &fs.PathError{Op: "reflink", Path: src.Name(), Err: fmt.Errorf("%w: not a regular file on both sides", ErrReflinkUnsupported)}
	}

	var d dstSide
	if t.BlockDevice() {
		// A device cannot say where its holes are: all of it is data, so
		// every source hole is zeroed and every data block compared.
		if err := t.SetSize(e.size); err != nil {
			return e.stats(), err
		}
		d.all = true
	} else {
		dinfo, err := sparse.Stat(t.OS())
		if err != nil {
			return e.stats(), err
		}
		if dinfo.Size == 0 && e.size > 0 && e.allowClone {
			// A new (empty) destination is one whole-file FICLONE; where
			// cloning is impossible it writes nothing, so with cloneOnly
			// it is its own probe.
			done, err := e.cloneWhole()
			if err != nil || done {
				if err == nil {
					err = e.countClone(w, info)
				}
				return e.stats(), err
			}
		}
		if e.cloneOnly {
			// A destination with data: refuse before the first write
			// (SetSize) when ranges cannot be cloned.
			if err := e.probeClone(); err != nil {
				return e.stats(), err
			}
		}
		// Sized first, then walked: the map shows what the filesystem
		// did when it grew the file, so the plan needs no guess.
		if err := t.SetSize(e.size); err != nil {
			return e.stats(), err
		}
		if dinfo.Size > 0 && e.recloneWhole(w) {
			// Emptied first, then cloned as a new copy is (as cp does):
			// FICLONE over 100,000 mapped extents takes twice as long as
			// freeing them and cloning onto nothing.
			if err := t.SetSize(0); err != nil {
				return e.stats(), err
			}
			done, err := e.cloneWhole()
			if err != nil || done {
				if err == nil {
					err = e.countClone(w, info)
				}
				return e.stats(), err
			}
			// Not cloned after all: the windows copy into the empty file.
			if err := t.SetSize(e.size); err != nil {
				return e.stats(), err
			}
			dinfo.Size = 0
		}
		if dinfo.Size > 0 {
			if d.w, err = sparse.NewWalker(t.OS()); err != nil {
				return e.stats(), err
			}
			// Preallocated blocks the walk calls holes are punched too
			// where the source has holes (looked for per window).
			if _, d.mayHide, err = d.w.Tally(ctx); err != nil {
				return e.stats(), err
			}
		}
	}

	adviseSequential(src)
	if d.w != nil || d.all {
		adviseSequential(t.OS())
	}
	// Whatever is read from a regular file, in a full read/write copy or
	// a comparison, is read directly where it is cold.
	e.srcCold = coldread.New(src)
	if d.w != nil {
		e.dstCold = coldread.New(t.OS())
	}
	if err := e.copyWindows(w, &d); err != nil {
		return e.stats(), err
	}
	return e.stats(), e.checkSource(info)
}

// countClone counts a whole-file clone's data, a window at a time, as
// the windows would have (its unstored zeros apart: sparse.UnstoredZeros),
// and checks the source did not change under it. It runs only after the
// clone succeeded: where cloning is impossible the windows count the data
// and no walk is spent on it.
func (e *engine) countClone(w *sparse.Walker, info sparse.FileInfo) error {
	if !e.counted || e.unstored {
		var total, unstored int64
		for lo := int64(0); lo < e.size; {
			ext, hi, err := w.Window(e.ctx, lo, e.size, windowExtents)
			if err != nil {
				return err
			}
			m, err := sparse.FromExtents(hi, ext)
			if err != nil {
				return err
			}
			total += m.Bytes()
			if e.unstored {
				unstored += sparse.UnstoredZeros(e.ctx, e.src, m, nil).Bytes()
			}
			lo = hi
		}
		e.total, e.counted = total, true
		e.unstoredBytes.Store(unstored)
	}
	e.cloned.Add(e.dataBytes())
	e.progress(e.dataBytes())
	return e.checkSource(info)
}

// recloneWhole reports whether a re-sync onto the existing destination is
// best made as a new copy is, by one whole-file FICLONE: cloning is allowed
// and works between the two files, the source has at least recloneWholeMin
// extents, and no range of the destination is already the source's (the
// same physical blocks at the same offsets), so that the windows would skip
// nothing. The windows' way, a FICLONERANGE per long range (each a
// transaction that flushes its source range) and a comparison of both
// files' short ranges, costs more there than one clone of every extent.
//
// A destination that shares blocks may share them with other files only: a
// snapshot of it, or the older version it was cloned from, as after
// last night's re-sync of a source that has since been copied anew. Those
// blocks are not the source's, so it is recloned too.
func (e *engine) recloneWhole(w *sparse.Walker) bool {
	if !e.allowClone || e.cloneOnly {
		return false
	}
	ext, _, err := w.Window(e.ctx, 0, e.size, recloneWholeMin)
	if err != nil || len(ext) < recloneWholeMin {
		return false
	}
	shares, err := e.sharesFlushed()
	if err != nil {
		return false
	}
	if shares {
		if mine, err := e.sharesSourceBlocks(w); err != nil || mine {
			return false
		}
	}
	return e.cloneWorks()
}

// longRanges returns the extents of m at least min bytes long.
func longRanges(m sparse.Map, min int64) sparse.Map {
	var long []sparse.Extent
	for _, x := range m.Extents() {
		if x.Len >= min {
			long = append(long, x)
		}
	}
	out, err := sparse.NewMap(m.Size(), long...)
	if err != nil { // a subset of a valid map is valid
		panic(err)
	}
	return out
}
