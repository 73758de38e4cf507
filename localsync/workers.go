package localsync

import (
	"context"
	"sync"

	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/internal/manifest"
	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/sparse"
)

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

// pipeline is the workers of a copy and the channel that feeds them: it
// runs from the first window to the last, so the workers stay busy while
// the next window is planned; the first error stops them all.
type pipeline struct {
	e      *engine
	ctx    context.Context
	cancel context.CancelCauseFunc
	jobs   chan job
	wg     sync.WaitGroup
	stop   func() // the Writebacker's
	chunk  int64  // a copy job's largest piece
	n      int    // workers

	bufOnce sync.Once
	bufs    [][]byte // two per worker (buffers)
}

// startPipeline starts n workers. A comparison waits on two reads and
// holds none in flight while it compares; twice the workers keep the
// disk's queue as deep as the physical floor's (16 x 1 MiB per file).
// Measured on 512 MiB dense images with 1% changed, cold, against 8
// workers in interleaved rounds (two sets of 7 and 9): 0.86x and 0.91x the
// time on ext4, 0.87x and 0.85x on XFS (medians of per-round ratios).
// prealloc: allocate small extents before copying them, where that pays
// (target.File.AllocateAhead).
func (e *engine) startPipeline(n int, prealloc bool) *pipeline {
	// No more workers than the file has buffers' worth of bytes: a small
	// file's copy needs one, and the workers' buffers are made together
	// (buffers).
	n = int(min(int64(n), max(1, (e.size+bufSize-1)/bufSize)))
	p := &pipeline{e: e, jobs: make(chan job, inFlight), stop: func() {}, chunk: bufSize, n: n}
	p.ctx, p.cancel = context.WithCancelCause(e.ctx)
	if !e.zeroScan && (e.allowClone || e.allowCFR) {
		p.chunk = kernelChunk
	}
	if !e.opts.NoSync {
		e.wb = target.NewWritebacker(e.dst, writebackEvery)
		p.stop = func() { e.wb.Stop(); e.wb = nil }
	}
	e.prealloc = prealloc
	if int64(n) > e.workers.Load() {
		e.workers.Store(int64(n))
	}
	for i := range n {
		p.wg.Go(func() { p.work(i) })
	}
	return p
}

// buffers returns worker i's two buffers (the source's and, for a
// comparison, the destination's). All workers' are cut from one
// allocation, made when the first comparison or read-write copy needs it
// (a copy that only clones or copies in the kernel never does), aligned
// for O_DIRECT and asked for huge pages (coldread.AlignedBuffers): 16
// workers' 32 MiB touched in 4 KiB pages were 8,192 page faults a
// re-sync, about 20 us each on a VM (a dense 1 GiB re-sync with 1%
// changed: 0.53x the time, 0.60x the CPU, against 1 MiB buffers from a
// process-wide sync.Pool). The source buffers come first, so a
// read-write copy, which uses only those, touches half of it.
func (p *pipeline) buffers(i int) (src, dst []byte) {
	p.bufOnce.Do(func() { p.bufs = coldread.AlignedBuffers(2*p.n, bufSize) })
	return p.bufs[i], p.bufs[p.n+i]
}

// work is worker i: it takes jobs until the channel closes, skipping
// them once the copy failed.
func (p *pipeline) work(i int) {
	w := worker{e: p.e, p: p, i: i}
	var one [1]sparse.Extent
	for j := range p.jobs {
		if p.ctx.Err() != nil {
			continue
		}
		batch := j.batch
		if j.kind == jobCopy && len(batch) > 1 && w.e.readsSpans() {
			if err := w.copySpans(batch); err != nil {
				p.cancel(err)
			}
			continue
		}
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
				p.cancel(err)
				break
			}
		}
	}
}

// fail stops the copy with err.
func (p *pipeline) fail(err error) { p.cancel(err) }

// put hands a job to the workers; false once the copy failed.
func (p *pipeline) put(j job) bool {
	if j.kind == jobCopy && p.e.prealloc {
		p.e.preallocateJob(j)
	}
	select {
	case p.jobs <- j:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// send hands m's extents to the workers as jobs of kind: small extents in
// batches, large ones in pieces of at most the kind's chunk.
func (p *pipeline) send(kind jobKind, m sparse.Map) {
	chunk := p.chunk
	if kind == jobCompare {
		chunk = p.e.compareChunk()
	}
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
			if !p.put(job{kind: kind, batch: xs[i:k]}) {
				return
			}
			i = k
			continue
		}
		x := xs[i]
		for off := x.Off; off < x.End(); off += chunk {
			if !p.put(job{kind: kind, off: off, n: min(chunk, x.End()-off)}) {
				return
			}
		}
		i++
	}
}

// wait lets the workers finish the jobs handed out and returns the
// copy's first error.
func (p *pipeline) wait() error {
	close(p.jobs)
	p.wg.Wait()
	p.stop()
	defer p.cancel(nil)
	if err := context.Cause(p.ctx); err != nil && p.e.ctx.Err() == nil {
		return err
	}
	return p.e.ctx.Err()
}

// preallocateJob allocates the destination blocks of a copy job's small
// extents, where that pays (target.File.AllocateAhead). It runs on the one
// goroutine that hands out the jobs, so the extents are allocated in file
// order and ext4 appends them to its extent tree: from the workers, out of
// order, they split leaves half full (about 1 MB more metadata at 100,000
// extents).
func (e *engine) preallocateJob(j job) {
	if j.batch == nil {
		e.dst.AllocateAhead(j.off, j.n, j.n)
		return
	}
	for _, x := range j.batch {
		e.dst.AllocateAhead(x.Off, x.Len, x.Len)
	}
}

// compareChunk is the size of a comparison job. Under a budget it is half
// a piece, so that a job's two reads are one reservation: a job that took
// two would queue behind every other worker between them, and its bytes
// would land in bursts (measured at 10 MiB/s: one-second windows of 0.80-
// 1.25x the limit, against 0.97-1.00x with one reservation per job). It
// stays a whole number of blocks, the unit of comparison.
func (e *engine) compareChunk() int64 {
	c := e.limit(bufSize)
	if c == bufSize {
		return c
	}
	return max(c/2/e.bs*e.bs, e.bs)
}

// worker holds one goroutine's buffers.
type worker struct {
	e        *engine
	p        *pipeline
	i        int // its index among the pipeline's workers
	lastKind jobKind
	dig      *manifest.Digester // the manifest's, made on first use
	ents     []manifest.Entry   // a piece's digests, reused
	span     []byte             // copySpans' buffer, made on first use
}

func (w *worker) buffers() ([]byte, []byte) { return w.p.buffers(w.i) }
