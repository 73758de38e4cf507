package localsync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/sparsesync/sparsesync/internal/blockhash"
	"github.com/sparsesync/sparsesync/internal/target"
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
	// writebackEvery is how many bytes are written between two kicks of
	// asynchronous writeback (startWriteback): the disk then writes while
	// the source is still being read, instead of all at the final fdatasync.
	writebackEvery = 8 << 20
)

// bufPool holds bufSize buffers shared by all copies.
// They are 4 KiB-aligned in memory so that cold ranges can be read into
// them with O_DIRECT.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, bufSize+4096)
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % 4096); r != 0 {
		b = b[4096-r:]
	}
	b = b[:bufSize:bufSize]
	return &b
}}

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

	allowClone, cloneOnly, allowCFR, allowRW bool
	clone, cfr                               methodState

	total                                int64
	done                                 atomic.Int64
	cloned, cfrBytes, rwBytes, unchanged atomic.Int64
	punched, zeroed, zeroBytes           atomic.Int64
	dirty                                atomic.Int64 // written since the last writeback kick

	// Cold ranges of a re-sync are read with O_DIRECT; nil: buffered.
	srcCold, dstCold *coldReader
}

// run copies w's file (src) into t following opts; see Copy.
func run(ctx context.Context, w *sparse.Walker, src *os.File, t *target.File, opts *Options) (Stats, error) {
	info := w.Info()
	srcMap, err := w.Map(ctx)
	if err != nil {
		return Stats{}, err
	}
	e := &engine{
		ctx: ctx, opts: opts, log: opts.Logger, src: src, dst: t,
		size: info.Size, bs: opts.BlockSize, total: srcMap.Bytes(),
		zeroScan: opts.DetectZeros || !w.HolesKnown(),
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
	if e.cloneOnly && !t.BlockDevice() {
		if err := e.probeClone(); err != nil {
			return e.stats(), err
		}
	}

	var dstMap sparse.Map
	if t.BlockDevice() {
		// A device cannot say where its holes are: treat all of it as data,
		// so every source hole is zeroed and every data block compared.
		if err := t.SetSize(e.size); err != nil {
			return e.stats(), err
		}
		if e.size > 0 {
			dstMap, err = sparse.NewMap(e.size, sparse.Extent{Off: 0, Len: e.size})
		} else {
			dstMap, err = sparse.NewMap(0)
		}
		if err != nil {
			return e.stats(), err
		}
	} else {
		dinfo, err := sparse.Stat(t.OS())
		if err != nil {
			return e.stats(), err
		}
		if dinfo.Size == 0 && e.size > 0 && e.allowClone {
			done, err := e.cloneWhole()
			if err != nil || done {
				if err == nil {
					err = e.checkSource(info)
				}
				return e.stats(), err
			}
		}
		if err := t.SetSize(e.size); err != nil {
			return e.stats(), err
		}
		if dinfo.Size > 0 {
			dw, err := sparse.NewWalker(t.OS())
			if err != nil {
				return e.stats(), err
			}
			if dstMap, err = dw.Map(ctx); err != nil {
				return e.stats(), err
			}
		} else {
			dstMap, _ = sparse.NewMap(e.size)
		}
	}

	adviseSequential(src)
	if both := srcMap.Intersect(dstMap); both.Len() > 0 {
		adviseSequential(t.OS())
	}
	extra := dstMap.Difference(srcMap)
	missing := srcMap.Difference(dstMap)
	both := srcMap.Intersect(dstMap)
	if both.Len() > 0 && !e.zeroScan && !t.BlockDevice() {
		shared := e.sharedRanges(both)
		e.unchanged.Add(shared.Bytes())
		e.done.Add(shared.Bytes())
		both = both.Difference(shared)
	}
	if both.Len() > 0 && !t.BlockDevice() {
		if fi, err := src.Stat(); err == nil && fi.Mode().IsRegular() {
			e.srcCold, e.dstCold = newColdReader(src), newColdReader(t.OS())
			defer e.srcCold.close()
			defer e.dstCold.close()
		}
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

// stats is a snapshot of the counters.
func (e *engine) stats() Stats {
	st := Stats{
		Size: e.size, DataBytes: e.total,
		ClonedBytes: e.cloned.Load(), CopiedBytes: e.cfrBytes.Load() + e.rwBytes.Load(),
		UnchangedBytes: e.unchanged.Load(), PunchedBytes: e.punched.Load(),
		ZeroedBytes: e.zeroed.Load(), ZeroBytes: e.zeroBytes.Load(),
		DirectReadBytes: e.srcCold.directBytes() + e.dstCold.directBytes(),
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

// wrote notes n bytes written to the destination's page cache and starts
// their writeback every writebackEvery bytes, unless the caller asked for
// no sync at all.
func (e *engine) wrote(n int64) {
	if e.opts.NoSync || n <= 0 {
		return
	}
	if e.dirty.Add(n) >= writebackEvery {
		e.dirty.Store(0)
		startWriteback(e.dst.OS())
	}
}

func (e *engine) progress(n int64) {
	d := e.done.Add(n)
	if e.opts.Progress != nil {
		e.opts.Progress(d, e.total)
	}
}

// checkSource compares the source's identity, size and times with what
// they were before the copy.
func (e *engine) checkSource(before sparse.FileInfo) error {
	after, err := sparse.Stat(e.src)
	if err != nil {
		return err
	}
	if after.Size != before.Size || !after.ModTime.Equal(before.ModTime) ||
		!after.ChangeTime.Equal(before.ChangeTime) || after.Ino != before.Ino || after.Dev != before.Dev {
		return &fs.PathError{Op: "copy", Path: e.src.Name(), Err: fmt.Errorf("%w (size %d -> %d, mtime %v -> %v)",
			ErrSourceChanged, before.Size, after.Size, before.ModTime, after.ModTime)}
	}
	return nil
}

// cloneWhole tries FICLONE onto the empty destination. done reports that
// the copy is complete.
func (e *engine) cloneWhole() (done bool, err error) {
	handled, err := cloneFile(e.src, e.dst.OS())
	switch {
	case handled && err == nil:
		e.cloned.Add(e.total)
		e.progress(e.total)
		e.clone.state.Store(stWorks)
		e.log.Debug("localsync: cloned whole file", "src", e.src.Name(), "dst", e.dst.Name())
		return true, nil
	case handled:
		return true, &fs.PathError{Op: "ficlone", Path: e.dst.Name(), Err: err}
	case e.cloneOnly:
		return true, &fs.PathError{Op: "ficlone", Path: e.dst.Name(), Err: fmt.Errorf("%w: %w", ErrReflinkUnsupported, err)}
	}
	e.log.Debug("localsync: FICLONE unsupported, copying extents", "src", e.src.Name(), "dst", e.dst.Name(), "err", err)
	e.clone.state.Store(stUnsupported)
	return false, nil
}

// probeClone checks, before the destination is touched, that the source can
// be cloned into the destination's filesystem: it clones the first block
// into an unnamed temporary file there.
func (e *engine) probeClone() error {
	if e.size == 0 {
		return nil
	}
	tmp, err := os.OpenFile(filepath.Dir(e.dst.OS().Name()), os.O_RDWR|oTmpfile, 0o600)
	if err != nil {
		return &fs.PathError{Op: "reflink probe", Path: filepath.Dir(e.dst.OS().Name()), Err: err}
	}
	defer tmp.Close()
	// One block, or the whole file when it is smaller (a range ending at
	// the source's end of file need not be aligned).
	_, handled, err := cloneRange(e.src, tmp, 0, min(e.size, 4096))
	if !handled {
		return &fs.PathError{Op: "ficlonerange", Path: e.dst.Name(), Err: fmt.Errorf("%w: %w", ErrReflinkUnsupported, err)}
	}
	if err != nil {
		return &fs.PathError{Op: "reflink probe", Path: e.dst.Name(), Err: err}
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

type jobKind uint8

const (
	jobCopy jobKind = iota
	jobCompare
)

type job struct {
	kind   jobKind
	off, n int64
	batch  []sparse.Extent // several small extents instead of off, n
}

// A batch job takes up to batchMax consecutive extents shorter than
// batchExtent: one channel hand-off per batch rather than per 4 KiB
// extent (100,000 hand-offs and goroutine wake-ups cost about a tenth of
// a 100k-extent copy), with the same number of workers in flight.
const (
	batchMax    = 32
	batchExtent = 64 << 10
)

// parallel runs the copy jobs (missing) and comparison jobs (both) on
// inFlight workers; the first error stops them all.
func (e *engine) parallel(missing, both sparse.Map) error {
	if missing.Len() == 0 && both.Len() == 0 {
		return nil
	}
	ctx, cancel := context.WithCancelCause(e.ctx)
	defer cancel(nil)
	jobs := make(chan job, inFlight)
	var wg sync.WaitGroup
	for range inFlight {
		wg.Go(func() {
			w := worker{e: e, h: blockhash.New(0)}
			defer w.release()
			var one [1]sparse.Extent
			for j := range jobs {
				if ctx.Err() != nil {
					continue
				}
				batch := j.batch
				if batch == nil {
					one[0] = sparse.Extent{Off: j.off, Len: j.n}
					batch = one[:]
				}
				for _, x := range batch {
					var err error
					if j.kind == jobCopy {
						err = w.copy(x.Off, x.Len)
					} else {
						err = w.compare(x.Off, x.Len)
					}
					if err != nil {
						cancel(err)
						break
					}
				}
			}
		})
	}
	put := func(j job) bool {
		select {
		case jobs <- j:
			return true
		case <-ctx.Done():
			return false
		}
	}
	send := func(kind jobKind, m sparse.Map, chunk int64) bool {
		xs := m.Extents()
		// Batches only where there are extents enough to keep every
		// worker busy many times over.
		per := min(batchMax, max(1, len(xs)/(inFlight*16)))
		for i := 0; i < len(xs); {
			if per > 1 && xs[i].Len < batchExtent {
				k, total := i, int64(0)
				for k < len(xs) && k-i < per && xs[k].Len < batchExtent && total+xs[k].Len <= chunk {
					total += xs[k].Len
					k++
				}
				if !put(job{kind: kind, batch: xs[i:k]}) {
					return false
				}
				i = k
				continue
			}
			x := xs[i]
			for off := x.Off; off < x.End(); off += chunk {
				if !put(job{kind: kind, off: off, n: min(chunk, x.End()-off)}) {
					return false
				}
			}
			i++
		}
		return true
	}
	chunk := int64(bufSize)
	if !e.zeroScan && (e.allowClone || e.allowCFR) {
		chunk = kernelChunk
	}
	if send(jobCopy, missing, chunk) {
		send(jobCompare, both, bufSize)
	}
	close(jobs)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && e.ctx.Err() == nil {
		return err
	}
	return e.ctx.Err()
}

// worker holds one goroutine's buffers and hasher.
type worker struct {
	e        *engine
	h        *blockhash.Hasher
	sbuf     *[]byte
	dbuf     *[]byte
	lastKind jobKind
}

func (w *worker) buffers() ([]byte, []byte) {
	if w.sbuf == nil {
		w.sbuf = bufPool.Get().(*[]byte)
	}
	if w.dbuf == nil {
		w.dbuf = bufPool.Get().(*[]byte)
	}
	return *w.sbuf, *w.dbuf
}

func (w *worker) release() {
	if w.sbuf != nil {
		bufPool.Put(w.sbuf)
	}
	if w.dbuf != nil {
		bufPool.Put(w.dbuf)
	}
}

// copy moves [off, off+n) of source data into a destination hole: reflink
// where aligned and possible, else copy_file_range, else read/write.
func (w *worker) copy(off, n int64) error {
	e := w.e
	if e.allowClone && e.aligned(off, n) {
		ok, err := e.viaClone(off, n)
		if err != nil {
			return err
		}
		if ok {
			e.progress(n)
			return nil
		}
	}
	if e.cloneOnly {
		return &fs.PathError{Op: "ficlonerange", Path: e.dst.Name(), Err: fmt.Errorf("%w: range %d+%d", ErrReflinkUnsupported, off, n)}
	}
	if e.allowCFR {
		done, ok, err := e.viaCopyRange(off, n)
		e.cfrBytes.Add(done)
		e.wrote(done)
		e.progress(done)
		if err != nil || (ok && done == n) {
			return err
		}
		off, n = off+done, n-done
	}
	if !e.allowRW {
		return &fs.PathError{Op: "copy_file_range", Path: e.dst.Name(), Err: fmt.Errorf("%w (and --method forbids falling back)", errors.ErrUnsupported)}
	}
	return w.readWrite(off, n)
}

// aligned reports whether FICLONERANGE can take the range: block-aligned,
// or ending at the end of the file.
func (e *engine) aligned(off, n int64) bool {
	const bs = 4096
	return off%bs == 0 && (n%bs == 0 || off+n == e.size)
}

// viaClone clones one range. ok is false when cloning cannot do it (nothing
// was written); FICLONERANGE is all or nothing for those errnos, so the range
// can always fall through to the next method.
func (e *engine) viaClone(off, n int64) (ok bool, err error) {
	if e.clone.state.Load() == stUnknown {
		e.clone.mu.Lock()
		if e.clone.state.Load() == stUnknown {
			_, handled, err := cloneRange(e.src, e.dst.OS(), off, n)
			if !handled {
				e.clone.state.Store(stUnsupported)
				e.clone.mu.Unlock()
				e.log.Debug("localsync: FICLONERANGE unsupported", "dst", e.dst.Name(), "err", err)
				return false, nil
			}
			e.clone.state.Store(stWorks)
			e.clone.mu.Unlock()
			return true, e.cloneDone(off, n, err)
		}
		e.clone.mu.Unlock()
	}
	if e.clone.state.Load() == stUnsupported {
		return false, nil
	}
	_, handled, err := cloneRange(e.src, e.dst.OS(), off, n)
	if !handled {
		e.log.Debug("localsync: FICLONERANGE refused a range", "off", off, "len", n, "err", err)
		return false, nil
	}
	return true, e.cloneDone(off, n, err)
}

func (e *engine) cloneDone(off, n int64, err error) error {
	if err != nil {
		return &fs.PathError{Op: "ficlonerange", Path: e.dst.Name(), Err: fmt.Errorf("at offset %d: %w", off, err)}
	}
	e.cloned.Add(n)
	return nil
}

// viaCopyRange copies a range with copy_file_range. ok false with done 0
// means the method cannot do it; once it has copied anything, an
// "unsupported" errno is a real error (ErrMethodFailed).
func (e *engine) viaCopyRange(off, n int64) (done int64, ok bool, err error) {
	if e.cfr.state.Load() == stUnknown {
		e.cfr.mu.Lock()
		if e.cfr.state.Load() == stUnknown {
			w, handled, err := copyRange(e.src, e.dst.OS(), off, n)
			if !handled || (err == nil && w == 0) {
				e.cfr.state.Store(stUnsupported)
				e.cfr.mu.Unlock()
				e.log.Debug("localsync: copy_file_range unsupported", "dst", e.dst.Name(), "n", w, "err", err)
				return 0, false, nil
			}
			if err != nil {
				e.cfr.mu.Unlock()
				return 0, true, e.cfrError(off, err)
			}
			e.cfr.state.Store(stWorks)
			done = w
		}
		e.cfr.mu.Unlock()
	}
	if done == 0 && e.cfr.state.Load() == stUnsupported {
		return 0, false, nil
	}
	for done < n {
		if err := e.ctx.Err(); err != nil {
			return done, true, err
		}
		w, handled, err := copyRange(e.src, e.dst.OS(), off+done, n-done)
		switch {
		case !handled:
			return done, true, e.cfrError(off+done, fmt.Errorf("%w: %w", ErrMethodFailed, err))
		case err != nil:
			return done, true, e.cfrError(off+done, err)
		case w == 0:
			return done, true, e.shrunk(off + done)
		}
		done += w
	}
	return done, true, nil
}

func (e *engine) cfrError(off int64, err error) error {
	return &fs.PathError{Op: "copy_file_range", Path: e.dst.Name(), Err: fmt.Errorf("at offset %d: %w", off, err)}
}

func (e *engine) shrunk(off int64) error {
	return &fs.PathError{Op: "read", Path: e.src.Name(), Err: fmt.Errorf("%w: end of file at %d, expected %d bytes", ErrSourceChanged, off, e.size)}
}

// readFull preads len(b) bytes at off from the source; a short read means
// the source shrank.
func (e *engine) readFull(b []byte, off int64) error {
	n, err := e.srcCold.readAt(e.src, b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		return e.shrunk(off + int64(n))
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &fs.PathError{Op: "read", Path: e.src.Name(), Err: fmt.Errorf("at offset %d: %w", off+int64(n), err)}
}

// readWrite copies a range through the worker's buffer. With zero scanning,
// all-zero blocks are not written (the destination range is a hole).
func (w *worker) readWrite(off, n int64) error {
	e := w.e
	buf, _ := w.buffers()
	for n > 0 {
		if err := e.ctx.Err(); err != nil {
			return err
		}
		c := min(n, int64(len(buf)))
		b := buf[:c]
		if err := e.readFull(b, off); err != nil {
			return err
		}
		if e.zeroScan {
			if err := w.writeNonZero(b, off); err != nil {
				return err
			}
		} else {
			if _, err := e.dst.WriteAt(b, off); err != nil {
				return err
			}
			e.rwBytes.Add(c)
			e.wrote(c)
		}
		e.progress(c)
		off, n = off+c, n-c
	}
	return nil
}

// writeNonZero writes the runs of non-zero blocks of b (at off).
func (w *worker) writeNonZero(b []byte, off int64) error {
	e := w.e
	bs := e.bs
	start := -1
	flush := func(end int) error {
		if start < 0 {
			return nil
		}
		if _, err := e.dst.WriteAt(b[start:end], off+int64(start)); err != nil {
			return err
		}
		e.rwBytes.Add(int64(end - start))
		e.wrote(int64(end - start))
		start = -1
		return nil
	}
	for p := 0; p < len(b); p += int(bs) {
		blk := b[p:min(p+int(bs), len(b))]
		if sparse.IsZero(blk) {
			e.zeroBytes.Add(int64(len(blk)))
			if err := flush(p); err != nil {
				return err
			}
		} else if start < 0 {
			start = p
		}
	}
	return flush(len(b))
}

// compare reads [off, off+n) from both files and writes only the blocks
// whose hashes differ.
func (w *worker) compare(off, n int64) error {
	e := w.e
	if err := e.ctx.Err(); err != nil {
		return err
	}
	sbuf, dbuf := w.buffers()
	s, d := sbuf[:n], dbuf[:n]
	// Both reads at once: a cold comparison waits on the disk, and two
	// reads in flight per worker keep its queue twice as deep.
	dstErr := make(chan error, 1)
	go func() {
		if got, err := e.dstCold.readAt(e.dst.OS(), d, off); got < len(d) {
			dstErr <- &fs.PathError{Op: "read", Path: e.dst.Name(), Err: fmt.Errorf("at offset %d: %w", off+int64(got), errOr(err, io.ErrUnexpectedEOF))}
			return
		}
		dstErr <- nil
	}()
	err := e.readFull(s, off)
	if derr := <-dstErr; err == nil {
		err = derr
	}
	if err != nil {
		return err
	}
	const (
		same = iota
		write
		zero
	)
	runKind, runStart := same, 0
	flush := func(end int) error {
		if end == runStart {
			return nil
		}
		o, l := off+int64(runStart), int64(end-runStart)
		switch runKind {
		case same:
			e.unchanged.Add(l)
		case zero:
			e.zeroBytes.Add(l)
			return e.zeroRange(o, l)
		case write:
			return w.writeChanged(s[runStart:end], o)
		}
		return nil
	}
	bs := int(e.bs)
	for p := 0; p < len(s); p += bs {
		q := min(p+bs, len(s))
		k := same
		switch {
		case e.zeroScan && sparse.IsZero(s[p:q]):
			k = zero
		case w.h.Sum(s[p:q]) != w.h.Sum(d[p:q]):
			k = write
		}
		if k != runKind {
			if err := flush(p); err != nil {
				return err
			}
			runKind, runStart = k, p
		}
	}
	if err := flush(len(s)); err != nil {
		return err
	}
	e.progress(n)
	return nil
}

// writeChanged writes a changed run. A long run is cloned where possible
// (the blocks stay shared, so the next re-sync need not read them); a short
// one is written from the buffer already read, since each FICLONERANGE is
// a transaction that first flushes the source range (measured on XFS: 2,600
// cloned 4 KiB runs cost more than reading 512 MiB).
func (w *worker) writeChanged(b []byte, off int64) error {
	e := w.e
	n := int64(len(b))
	if e.allowClone && (n >= cloneRunMin || e.cloneOnly) && e.aligned(off, n) {
		ok, err := e.viaClone(off, n)
		if ok || err != nil {
			return err
		}
	}
	if e.cloneOnly {
		return &fs.PathError{Op: "ficlonerange", Path: e.dst.Name(), Err: fmt.Errorf("%w: range %d+%d", ErrReflinkUnsupported, off, n)}
	}
	if _, err := e.dst.WriteAt(b, off); err != nil {
		return err
	}
	e.rwBytes.Add(n)
	e.wrote(n)
	return nil
}

func errOr(err, def error) error {
	if err == nil || err == io.EOF {
		return def
	}
	return err
}

// sharedRanges returns the parts of within where the destination maps the
// same physical blocks as the source at the same offsets (a reflink copy
// neither side has rewritten since): equal without reading. Both files are
// flushed first so that dirty pages cannot hide behind an old mapping.
func (e *engine) sharedRanges(within sparse.Map) sparse.Map {
	empty, _ := sparse.NewMap(within.Size())
	collect := func(f *os.File) ([]sparse.FiemapExtent, error) {
		var out []sparse.FiemapExtent
		err := sparse.Fiemap(e.ctx, f, 0, e.size, func(x sparse.FiemapExtent) error {
			const bad = sparse.FiemapUnknown | sparse.FiemapDelalloc | sparse.FiemapEncoded | sparse.FiemapDataEncrypted |
				sparse.FiemapNotAligned | sparse.FiemapDataInline | sparse.FiemapDataTail | sparse.FiemapUnwritten
			if x.Flags&sparse.FiemapShared != 0 && x.Flags&bad == 0 {
				out = append(out, x)
			}
			return nil
		})
		return out, err
	}
	d, err := collect(e.dst.OS())
	if err != nil || len(d) == 0 {
		return empty
	}
	if err := target.Fdatasync(e.src); err != nil {
		return empty
	}
	if err := e.dst.Sync(); err != nil {
		return empty
	}
	s, err := collect(e.src)
	if err != nil {
		return empty
	}
	if d, err = collect(e.dst.OS()); err != nil {
		return empty
	}
	var same []sparse.Extent
	for i, j := 0, 0; i < len(s) && j < len(d); {
		a, b := s[i], d[j]
		lo, hi := max(a.Logical, b.Logical), min(a.Logical+a.Length, b.Logical+b.Length)
		if lo < hi && a.Physical-a.Logical == b.Physical-b.Logical {
			if n := len(same); n > 0 && same[n-1].End() == lo {
				same[n-1].Len = hi - same[n-1].Off
			} else {
				same = append(same, sparse.Extent{Off: lo, Len: hi - lo})
			}
		}
		if a.Logical+a.Length <= b.Logical+b.Length {
			i++
		} else {
			j++
		}
	}
	for k := range same {
		same[k].Len = min(same[k].End(), e.size) - same[k].Off
	}
	m, err := sparse.NewMap(e.size, same...)
	if err != nil {
		return empty
	}
	return m.Intersect(within)
}
