package localsync

import (
	"context"
	"fmt"
	"io/fs"
	"os"

	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/internal/destplan"
	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/sparse"
)

// run copies w's file (src) into t following opts; see Copy.
func run(ctx context.Context, w *sparse.Walker, src *os.File, t *target.File, opts *Options) (Stats, error) {
	info := w.Info()
	srcMap, err := w.Map(ctx)
	if err != nil {
		return Stats{}, err
	}
	walked := srcMap // SEEK_DATA's map, before unstored zeros are taken out
	zeroScan := opts.DetectZeros || !w.HolesKnown()
	if !zeroScan && !info.BlockDevice {
		// Ranges SEEK_DATA calls data only because zero pages are cached
		// over unwritten space (XFS) are holes: see sparse.UnstoredZeros.
		if z := sparse.UnstoredZeros(ctx, src, srcMap, nil); z.Len() > 0 {
			opts.Logger.Debug("localsync: unwritten ranges read as holes", "src", src.Name(), "bytes", z.Bytes(), "ranges", z.Len())
			srcMap = srcMap.Difference(z)
		}
	}
	e := &engine{
		ctx: ctx, opts: opts, log: opts.Logger, src: src, dst: t,
		size: info.Size, bs: opts.BlockSize, total: srcMap.Bytes(),
		zeroScan: zeroScan,
	}
	e.allowClone = !e.zeroScan && mayClone(opts, w) && !t.BlockDevice()
	e.cloneOnly = opts.Method == MethodReflink || opts.Reflink == ReflinkAlways
	// copy_file_range shares blocks on XFS and btrfs, so "never" skips it
	// unless it was asked for by name.
	e.allowCFR = !e.zeroScan && !e.cloneOnly &&
		((opts.Method == MethodAuto && opts.Reflink != ReflinkNever) || opts.Method == MethodCopyRange)
	e.allowRW = e.zeroScan || (!e.cloneOnly && (opts.Method == MethodAuto || opts.Method == MethodReadWrite))
	if e.cloneOnly && !e.allowClone {
		return e.stats(), &fs.PathError{Op: "reflink", Path: src.Name(), Err: fmt.Errorf("%w: not a regular file on both sides", ErrReflinkUnsupported)}
	}

	in := destplan.Input{Src: srcMap, Unit: 1} // localsync compares exact bytes
	if t.BlockDevice() {
		// A device cannot say where its holes are: all of it is data, so
		// every source hole is zeroed and every data block compared.
		if err := t.SetSize(e.size); err != nil {
			return e.stats(), err
		}
		in.Dst, _ = sparse.NewMap(e.size)
		in.DstHolesUnknown = true
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
					err = e.checkSource(info)
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
		in.Dst, _ = sparse.NewMap(e.size)
		if dinfo.Size > 0 {
			dw, err := sparse.NewWalker(t.OS())
			if err != nil {
				return e.stats(), err
			}
			if in.Dst, err = dw.Map(ctx); err != nil {
				return e.stats(), err
			}
			// Preallocated blocks the walk calls holes are punched too
			// where the source has holes.
			if in.Hidden, err = sparse.HiddenAllocation(ctx, t.OS(), in.Dst, dw.Info().Allocated); err != nil {
				return e.stats(), err
			}
		}
	}
	if in.Hidden.Len() > 0 {
		// Where the source has its own preallocation the destination's
		// is exact (a whole-file clone on btrfs copies it), and punching
		// it would make every re-sync write.
		var err error
		if in.Keep, err = sparse.HiddenAllocation(ctx, src, walked, info.Allocated); err != nil {
			return e.stats(), err
		}
	}
	plan, err := destplan.Make(in)
	if err != nil {
		return e.stats(), err
	}

	adviseSequential(src)
	if plan.Compare.Len() > 0 {
		adviseSequential(t.OS())
	}
	extra, missing, both := plan.Punch, plan.Copy(), plan.Compare
	if both.Len() > 0 && !e.zeroScan && !t.BlockDevice() {
		shared := e.sharedRanges(both)
		e.unchanged.Add(shared.Bytes())
		e.done.Add(shared.Bytes())
		both = both.Difference(shared)
	}
	if both.Len() > 0 && e.allowClone && !e.cloneOnly {
		// Re-sync by cloning: where source and destination share a
		// filesystem that can reflink, the destination's unshared data
		// becomes the source's blocks, range by range, with no byte read
		// or written (as cp --reflink re-copies a file, but ranges
		// already shared are left alone). Ranges shorter than cloneRunMin
		// are compared instead: each FICLONERANGE is a transaction that
		// flushes its source range, and thousands of small ones cost more
		// than reading them (writeChanged). Reflink never compares all.
		if long := longRanges(both, cloneRunMin); long.Len() > 0 && e.cloneWorks() {
			missing = missing.Union(long)
			both = both.Difference(long)
		}
	}
	// Whatever is read from a regular file, in a full read/write copy or
	// a comparison, is read directly where it is cold.
	e.srcCold = coldread.New(src)
	if both.Len() > 0 && !t.BlockDevice() {
		e.dstCold = coldread.New(t.OS())
	}
	e.log.Debug("localsync: plan", "src", src.Name(), "dst", t.Name(), "size", e.size,
		"data", e.total, "copy", missing.Bytes(), "compare", both.Bytes(), "zero", extra.Bytes())

	for _, x := range extra.Extents() {
		if err := e.zeroRange(x.Off, x.Len); err != nil {
			return e.stats(), err
		}
	}
	if err := e.parallel(missing, both); err != nil {
		return e.stats(), err
	}
	return e.stats(), e.checkSource(info)
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

// sharedRanges returns the parts of within where the destination maps the
// same physical blocks as the source at the same offsets (a reflink copy
// neither side has rewritten since, sparse.SharedRanges): equal without
// reading. Both files are flushed first so that dirty pages cannot hide
// behind an old mapping; a destination that shares nothing costs one FIEMAP
// and no flush.
func (e *engine) sharedRanges(within sparse.Map) sparse.Map {
	empty, _ := sparse.NewMap(within.Size())
	if d, err := sparse.SharedExtents(e.ctx, e.dst.OS(), e.size); err != nil || len(d) == 0 {
		return empty
	}
	if err := target.Fdatasync(e.src); err != nil {
		return empty
	}
	if err := e.dst.Sync(); err != nil {
		return empty
	}
	m, err := sparse.SharedRanges(e.ctx, e.src, e.dst.OS(), e.size)
	if err != nil {
		return empty
	}
	return m.Intersect(within)
}
