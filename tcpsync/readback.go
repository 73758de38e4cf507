package tcpsync

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparsesync/sparsesync/sparse"
)

// ReadBack selects the storage check a receiver makes before it reports a
// sync verified.
//
// Without it, the end-to-end digest proves the transfer: it is computed
// from the bytes the receiver received or read for its compare, chunk by
// chunk. With it, after the final fdatasync the receiver reads the
// target's data back (the extents it holds within the source's data
// blocks: what it wrote or compared, never a range the peer only
// described; holes read as zeros, which the digest skips), bypassing the
// page cache (O_DIRECT, or a buffered read after POSIX_FADV_DONTNEED drops
// the file's clean pages), and checks the stored bytes against the
// source's digest over the whole file, whatever the resume history (the
// sender also digests the chunks a resume skipped). A
// mismatch ends the sync with ErrVerify, leaves an in-place target marked
// incomplete with its checkpoint back at the start (an atomic target is not
// replaced), and the client's full-compare retry repairs it.
type ReadBack uint8

const (
	// ReadBackAuto reads back atomic syncs only (the default).
	ReadBackAuto ReadBack = iota
	// ReadBackOn reads back every sync (replica.Rebuild turns it on when
	// its options leave ReadBackAuto).
	ReadBackOn
	// ReadBackOff never reads back.
	ReadBackOff
)

// String returns auto, on or off (the CLI's --read-back values).
func (r ReadBack) String() string {
	switch r {
	case ReadBackAuto:
		return "auto"
	case ReadBackOn:
		return "on"
	case ReadBackOff:
		return "off"
	}
	return fmt.Sprintf("ReadBack(%d)", int(r))
}

// ParseReadBack parses auto, on or off ("" is auto).
func ParseReadBack(s string) (ReadBack, error) {
	if s == "" {
		return ReadBackAuto, nil
	}
	for r := ReadBackAuto; r <= ReadBackOff; r++ {
		if strings.EqualFold(s, r.String()) {
			return r, nil
		}
	}
	return 0, fmt.Errorf("tcpsync: unknown read-back mode %q (want auto, on or off)", s)
}

// openReadBack asks the peer for a read-back sync (OPEN flag): the sender
// then digests the whole file, the receiver reads the target back.
const openReadBack = 1 << 7

// on reports whether a sync with atomic set reads back.
func (r ReadBack) on(atomic bool) bool {
	return r == ReadBackOn || (r == ReadBackAuto && atomic)
}

// testHooks let tests act on the target at fixed points of a receiver's
// session (nil outside tests).
type testHooks struct {
	// beforeCheckpoint runs after a checkpoint's fdatasync, before the
	// target is stamped and the checkpoint recorded up to done.
	beforeCheckpoint func(f *os.File, done int64)
	// beforeFinalCheck runs before the final check: after the final
	// fdatasync and before the read-back, or before the digest comparison
	// when there is no read-back.
	beforeFinalCheck func(f *os.File)
	// afterReadBackRead runs after each read of the read-back (on its
	// worker goroutines): a test slows the storage down with it.
	afterReadBackRead func()
	// narrowMaps makes the client play an older peer, without
	// featWideMaps.
	narrowMaps bool
}

func (h *testHooks) readBackRead() {
	if h != nil && h.afterReadBackRead != nil {
		h.afterReadBackRead()
	}
}

func (h *testHooks) finalCheck(f *os.File) {
	if h != nil && h.beforeFinalCheck != nil {
		h.beforeFinalCheck(f)
	}
}

// prefixDigest reads the source's chunks below first (those a resume
// skips) and returns their digest, computed as produce does, so a
// read-back sync's DONE covers the whole file.
func (s *sender) prefixDigest(ctx context.Context, first int) (digest, error) {
	var total digest
	buf := make([]byte, maxDataPayload)
	bs := s.p.bs
	dk := newDigestKey(s.p.seed)
	for k := range first {
		for _, pc := range pieces(s.plan.chunk(k).ext, s.readPiece()) {
			if err := ctx.Err(); err != nil {
				return total, context.Cause(ctx)
			}
			b := buf[:pc.end-pc.start]
			if err := s.f.m.read(pc.end - pc.start); err != nil {
				return total, err
			}
			if err := readFull(s.src, b, pc.start); err != nil {
				return total, err
			}
			for _, se := range pc.ext {
				lo, hi := se.Off-pc.start, se.End()-pc.start
				for p := lo; p < hi; p += bs {
					if blk := b[p:min(p+bs, hi)]; !sparse.IsZero(blk) {
						total.addBlock(dk, pc.start+p, blk)
					}
				}
			}
		}
	}
	return total, nil
}

// readBackSize is the size of one read-back read.
const readBackSize = 4 << 20

// readBack checks the stored target against the source after the final
// fdatasync (see ReadBack). whole is the sender's digest of the whole file.
// On a mismatch the checkpoint goes back to the start.
//
// A read-back can outlast the idle timeout (a large image, slow storage):
// the bytes it reads are progress for this side's watchdog, and a peer
// that understands them (featKeepalive) gets a PROGRESS frame with the
// bytes read so far every keepaliveEvery, which its watchdog and read
// deadline take as progress.
func (r *receiver) readBack(ctx context.Context, q *sendq, whole digest) error {
	f := r.t.w.OS()
	if r.t.atomic() {
		// fsync, as the commit will (the size is metadata).
		if err := f.Sync(); err != nil {
			return fmt.Errorf("tcpsync: %s: %w", r.t.display, err)
		}
	} else if err := r.t.sync(); err != nil {
		return err
	}
	r.p.hooks.finalCheck(f)
	// What the target holds, as stored: the read-back reads its data
	// within the source's blocks. A hole reads as zeros and zero blocks add
	// nothing to the digest, so the result is the digest of every source
	// block, at the cost of the data this receiver wrote or compared (in
	// this session or the one it resumes), never of a size or a map the
	// peer claimed.
	w, err := sparse.NewWalker(f)
	if err != nil {
		return fmt.Errorf("tcpsync: reading back %s: %w", r.t.display, err)
	}
	held, err := w.Map(ctx)
	if err != nil {
		return fmt.Errorf("tcpsync: reading back %s: %w", r.t.display, err)
	}
	read := r.plan.blocks.Intersect(held.RoundOut(r.p.bs))
	var done atomic.Int64
	stop := r.keepalive(ctx, q, done.Load, 0, r.f.keepalive)
	got, err := readBackDigest(ctx, f, read, r.p.bs, r.p.seed, func(n int64) error {
		done.Add(n)
		r.f.progress(n)
		r.p.hooks.readBackRead()
		return r.f.m.read(n)
	})
	stop()
	if err != nil {
		return fmt.Errorf("tcpsync: reading back %s: %w", r.t.display, err)
	}
	r.st.ReadBackBytes = read.Bytes()
	if got == whole {
		if err := r.checkOutsideData(ctx, f, held); err != nil {
			return err
		}
		r.st.ReadBack = true
		return nil
	}
	// Never leave a checkpoint over a chunk whose check failed. The whole
	// file is checked as one digest (per-chunk digests would cost memory in
	// proportion to the size a peer claims), so the checkpoint goes back to
	// the start and the full-compare retry re-checks every block.
	r.water, r.first = 0, 0
	if !r.t.atomic() {
		r.sc.Done = 0
		if r.t.stamp(&r.sc) == nil {
			_ = r.t.saveSidecar(&r.sc)
		}
	}
	return fmt.Errorf("%w: %s: stored bytes differ from the source's (read back after fdatasync)", ErrVerify, r.t.display)
}

// checkOutsideData checks that the target holds no non-zero byte outside
// the source's data blocks (where the receiver punched holes).
func (r *receiver) checkOutsideData(ctx context.Context, f *os.File, held sparse.Map) error {
	extra := held.Difference(r.plan.blocks)
	if extra.Len() == 0 {
		return nil
	}
	buf := make([]byte, 1<<20)
	for _, e := range extra.Extents() {
		for off := e.Off; off < e.End(); {
			if err := ctx.Err(); err != nil {
				return context.Cause(ctx)
			}
			n := min(e.End()-off, int64(len(buf)))
			if err := r.f.m.read(n); err != nil {
				return err
			}
			if err := readFull(f, buf[:n], off); err != nil {
				return err
			}
			if !sparse.IsZero(buf[:n]) {
				return fmt.Errorf("%w: %s: data at %d where the source has a hole (read back)", ErrVerify, r.t.display, off)
			}
			off += n
		}
	}
	return nil
}

// readBackWorkers is how many reads the read-back keeps in flight (each
// with its own O_DIRECT descriptor and 4 MiB buffer).
const readBackWorkers = 2

// readJob is one read of the read-back: up to readBackSize bytes of what
// it reads.
type readJob struct{ off, n int64 }

// keepaliveEvery is the most time between two PROGRESS frames (less
// with an idle timeout under 4 s: a quarter of it).
const keepaliveEvery = time.Second

// keepalive sends PROGRESS frames with done() and flags, while the
// read-back (or, with flagWorked, the whole sync) runs, if on (the peer
// understands them); stop ends it (and waits for it).
func (r *receiver) keepalive(ctx context.Context, q *sendq, done func() int64, flags uint8, on bool) (stop func()) {
	if !on {
		return func() {}
	}
	every := keepaliveEvery
	if r.f.idle > 0 {
		every = min(every, max(r.f.idle/4, 10*time.Millisecond))
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-quit:
				return
			}
			a := q.frame(fProgress)
			a.flags = flags
			a.u64(uint64(done()))
			if q.put(ctx, a) != nil {
				return
			}
		}
	})
	return func() {
		close(quit)
		wg.Wait()
	}
}

// readBackDigest computes the digest of the file as stored over the
// ranges m (whole blocks of bs), bypassing the page cache where the system
// allows (uncachedReader), with readBackWorkers reads in flight; each read
// of n bytes is reported to onRead. The jobs are cut from the extents as
// the workers take them, so memory does not grow with the file.
// readBackDigest reads m's blocks of f and returns their digest; onRead is
// told of each read (and may wait: the budget), an error ends it.
func readBackDigest(ctx context.Context, f *os.File, m sparse.Map, bs int64, seed uint64, onRead func(n int64) error) (digest, error) {
	ext := m.Extents()
	var mu sync.Mutex
	var ei int
	var off int64
	if len(ext) > 0 {
		off = ext[0].Off
	}
	next := func() (readJob, bool) {
		mu.Lock()
		defer mu.Unlock()
		for ei < len(ext) && off >= ext[ei].End() {
			ei++
			if ei < len(ext) {
				off = ext[ei].Off
			}
		}
		if ei >= len(ext) {
			return readJob{}, false
		}
		j := readJob{off, min(ext[ei].End()-off, readBackSize)}
		off += j.n
		return j, true
	}
	parts := make([]digest, readBackWorkers)
	g, gctx := newGroup(ctx)
	for w := range parts {
		g.Go(func() error {
			rd, err := newUncachedReader(f)
			if err != nil {
				return err
			}
			defer rd.close()
			dk := newDigestKey(seed)
			for {
				j, ok := next()
				if !ok {
					return nil
				}
				if err := gctx.Err(); err != nil {
					return context.Cause(gctx)
				}
				b, err := rd.read(j.off, j.n)
				if err != nil {
					return err
				}
				if err := onRead(j.n); err != nil {
					return err
				}
				for q := int64(0); q < j.n; q += bs {
					if blk := b[q:min(q+bs, j.n)]; !sparse.IsZero(blk) {
						parts[w].addBlock(dk, j.off+q, blk)
					}
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		return digest{}, err
	}
	var total digest
	for _, d := range parts {
		total.add(d)
	}
	return total, nil
}
