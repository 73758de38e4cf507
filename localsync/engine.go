package localsync

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/qos"
	"github.com/sparsesync/sparsesync/sparse"
)

const (
	// inFlight is how many pieces of work run at once: enough to keep a
	// few reads queued on a disk when extents are small and latency-bound.
	inFlight = 8
	// bufSize is the read/write and comparison buffer (two per worker).
	bufSize = 1 << 20
	// kernelChunk caps one clone or copy_file_range job, so large extents
	// still spread over the workers and report progress.
	kernelChunk = 64 << 20
	// cloneRunMin is the shortest changed run a re-sync clones rather than
	// writes.
	cloneRunMin = 256 << 10
	// recloneWholeMin is the source extent count from which a re-sync onto
	// a destination that shares no block with the source is one whole-file
	// FICLONE (recloneWhole) instead of a FICLONERANGE per long range and a
	// comparison of the short ones: 100,000 4 KiB extents on XFS clone in
	// 1.9 s and compare in 4.4 s (docs/benchmarks.md).
	recloneWholeMin = 1024
	// writebackEvery is how many bytes are written between two starts of
	// asynchronous writeback (target.Writebacker): the disk then writes while
	// the source is still being read, instead of all at the final fdatasync.
	writebackEvery = 8 << 20
)

// Method probing state, per copy and method.
const (
	stUnknown uint32 = iota
	stWorks
	stUnsupported
)

type methodState struct {
	mu    sync.Mutex // held by the one goroutine that probes an unknown method
	state atomic.Uint32
}

// engine is one copy in progress. Its counters are updated by the workers.
type engine struct {
	ctx      context.Context
	opts     *Options
	log      *slog.Logger
	src      *os.File
	dst      *target.File
	size     int64
	bs       int64
	zeroScan bool // read the data and leave zero blocks as holes
	// unstored: the source's unstored zeros are holes (sparse.UnstoredZeros).
	unstored bool
	// srcHide: the source may hold hidden preallocations
	// (sourceMayHide); nil: not walked yet.
	srcHide *bool
	// counted: total is the source's data from a first walk (for the
	// progress total); else the windows add to it as they are planned.
	counted bool
	// sharedChecked: the destination was looked at for shared blocks
	// (sharesFlushed); mayShare: it has some, and both files were flushed;
	// shareErr: why that look or that flush failed.
	sharedChecked, mayShare bool
	shareErr                error
	// prealloc: allocate a small extent's destination blocks before
	// copying it, where that pays (target.File.AllocateAhead).
	prealloc bool

	allowClone, cloneOnly, allowCFR, allowRW bool
	// coldRW: a large extent whose source is cold is read directly and
	// written, not copied with copy_file_range (readsCold).
	coldRW     bool
	clone, cfr methodState
	// gate admits one large copy_file_range into dst at a time (enter).
	gate chan struct{}

	total                                int64        // the source's data, as walked (counted)
	unstoredBytes                        atomic.Int64 // of total, found to be unstored zeros since
	done                                 atomic.Int64
	cloned, cfrBytes, rwBytes, unchanged atomic.Int64
	punched, zeroed, zeroBytes           atomic.Int64
	wb                                   *target.Writebacker // during a pipeline; nil: no writeback during the copy
	throttled                            atomic.Int64        // nanoseconds workers waited on opts.Budget, summed
	workers                              atomic.Int64        // the most workers that ran at once

	// dg is the manifest work (Options.Manifest); nil: none.
	dg *digests
	// manifestBytes of the destination were not read: its manifest
	// vouched for them.
	manifestBytes atomic.Int64

	// Cold ranges are read with O_DIRECT (the source in a full
	// read/write copy and a re-sync, the destination in a re-sync); nil:
	// buffered.
	srcCold, dstCold *coldread.Reader
}

// stats is a snapshot of the counters.
func (e *engine) stats() Stats {
	st := Stats{
		Size: e.size, DataBytes: e.dataBytes(),
		ClonedBytes: e.cloned.Load(), CopiedBytes: e.cfrBytes.Load() + e.rwBytes.Load(),
		UnchangedBytes: e.unchanged.Load(), PunchedBytes: e.punched.Load(),
		ZeroedBytes: e.zeroed.Load(), ZeroBytes: e.zeroBytes.Load(),
		DirectReadBytes: e.srcCold.DirectBytes() + e.dstCold.DirectBytes(),
		ManifestBytes:   e.manifestBytes.Load(),
	}
	if w := e.workers.Load(); w > 0 {
		st.Throttled = time.Duration(e.throttled.Load() / w)
	}
	for m, n := range map[Method]int64{MethodReflink: st.ClonedBytes, MethodCopyRange: e.cfrBytes.Load(), MethodReadWrite: e.rwBytes.Load()} {
		if n == 0 {
			continue
		}
		if st.Method == MethodAuto {
			st.Method = m
		} else {
			st.Method = MethodMixed
		}
	}
	return st
}

// throttle waits until the budget admits read bytes from storage and
// written bytes to it.
func (e *engine) throttle(read, written int64) error {
	b := &e.opts.Budget
	if b.Read == nil && b.Write == nil {
		return nil
	}
	limited := b.Limited()
	var start time.Time
	if limited {
		start = time.Now()
	}
	err := b.Read.Wait(e.ctx, read)
	if err == nil {
		err = b.Write.Wait(e.ctx, written)
	}
	if limited {
		e.throttled.Add(int64(time.Since(start)))
	}
	return err
}

// limit caps n at the budget's piece size while a budget limits reads or
// writes, so that one read, write or kernel copy never outruns the rate
// over a short window. It is asked again for every piece: a rate changed
// while the copy runs applies to the next one.
func (e *engine) limit(n int64) int64 {
	for _, l := range []*qos.Limiter{e.opts.Budget.Read, e.opts.Budget.Write} {
		if p := l.Piece(); p > 0 {
			n = min(n, p)
		}
	}
	return n
}

// wrote notes n bytes written to the destination's page cache: the
// pipeline's Writebacker starts their writeback every writebackEvery bytes,
// from one goroutine of its own, so that no copy worker waits in
// sync_file_range (on ext4 and XFS it allocates the blocks of every delayed
// write it starts: at a million 4 KiB extents, tenths of a second per
// call). Nothing with NoSync.
func (e *engine) wrote(n int64) { e.wb.Wrote(n) }

func (e *engine) progress(n int64) {
	d := e.done.Add(n)
	if e.opts.Progress != nil {
		e.opts.Progress(d, e.dataBytes())
	}
}

// dataBytes is the source's data: what the first walk counted, less the
// unstored zeros the windows found in it so far.
func (e *engine) dataBytes() int64 { return e.total - e.unstoredBytes.Load() }

// checkSource compares the source's identity, size and times with what
// they were before the copy.
func (e *engine) checkSource(before sparse.FileInfo) error {
	after, err := sparse.Stat(e.src)
	if err != nil {
		return err
	}
	if !sparse.SameVersion(before, after) {
		return &fs.PathError{Op: "copy", Path: e.src.Name(), Err: fmt.Errorf("%w (size %d -> %d, mtime %v -> %v)",
			ErrSourceChanged, before.Size, after.Size, before.ModTime, after.ModTime)}
	}
	return nil
}

// zeroRange makes a destination range read as zeros.
func (e *engine) zeroRange(off, n int64) error {
	punched, err := e.dst.Zero(off, n)
	if err != nil {
		return err
	}
	if punched {
		e.punched.Add(n)
	} else {
		e.zeroed.Add(n)
	}
	return nil
}
