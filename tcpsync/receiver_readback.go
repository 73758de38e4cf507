package tcpsync

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// readBackSize is the size of one read-back read.
const readBackSize = 4 << 20

// readBack checks the stored target against the source after the final
// fdatasync (see ReadBack). whole is the sender's digest of the whole file.
// On a mismatch the checkpoint goes back to the start.
//
// A read-back can outlast the idle timeout (a large image, slow storage):
// the bytes it reads are progress for this side's watchdog, and a peer
// that understands them (wire.FeatKeepalive) gets a PROGRESS frame with the
// bytes read so far every keepaliveEvery, which its watchdog and read
// deadline take as progress.
func (r *receiver) readBack(ctx context.Context, q *sendq, whole digest) error {
	f := r.t.w.OS()
	if r.t.atomic() {
		// fsync, as the commit will (the size is metadata).
		if err := r.whileBusy(r.t.w.Fsync); err != nil {
			return fmt.Errorf("%s: %w", r.t.display, err)
		}
	} else if err := r.whileBusy(r.t.sync); err != nil {
		return err
	}
	r.p.hooks.finalCheck(f)
	// What the target holds, as stored: the read-back reads its data
	// within the source's blocks (with wire.FeatWindows, all of it, a window at
	// a time). A hole reads as zeros and zero blocks add
	// nothing to the digest, so the result is the digest of every source
	// block, at the cost of the data this receiver wrote or compared (in
	// this session or the one it resumes), never of a size or a map the
	// peer claimed.
	var done atomic.Int64
	onRead := func(n int64) error {
		done.Add(n)
		r.f.progress(n)
		r.p.hooks.readBackRead()
		return r.f.m.read(n)
	}
	// Reported never past the source's data blocks (the sender's bound),
	// the whole file's even when this session resumed.
	stop := r.keepalive(ctx, q, func() int64 { return min(done.Load(), r.srcData) }, 0, r.f.keepalive)
	got, read, held, err := r.readBackDigest(ctx, f, onRead)
	stop()
	if err != nil {
		return fmt.Errorf("reading back %s: %w", r.t.display, err)
	}
	r.st.ReadBackBytes = read
	if got == whole {
		if !r.f.windows {
			if err := r.checkOutsideData(ctx, f, held); err != nil {
				return err
			}
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

// readBackDigest reads the target back: without windows, its data within
// the source's blocks (held is its whole map, for checkOutsideData); with
// them, all of its data (readBackWindows).
func (r *receiver) readBackDigest(ctx context.Context, f *os.File, onRead func(int64) error) (digest, int64, sparse.Map, error) {
	if r.f.windows {
		got, read, err := r.readBackWindows(ctx, onRead)
		return got, read, sparse.Map{}, err
	}
	w, err := sparse.NewWalker(f)
	if err != nil {
		return digest{}, 0, sparse.Map{}, err
	}
	held, err := w.Map(ctx)
	if err != nil {
		return digest{}, 0, sparse.Map{}, err
	}
	read := r.plan.blocks.Intersect(held.RoundOut(r.p.bs))
	got, err := readBackDigest(ctx, f, read, r.p.bs, r.p.seed, onRead)
	return got, read.Bytes(), held, err
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
			if err := readExact(f, buf[:n], off, shortRead{r.t.display, ErrVerify}); err != nil {
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

// keepaliveEvery is the most time between two PROGRESS frames (less
// with an idle timeout under 4 s: a quarter of it).
const keepaliveEvery = time.Second

// keepalive sends PROGRESS frames with done() and flags, while the
// read-back (or, with wire.FlagWorked, the whole sync) runs, if on (the peer
// understands them); stop ends it (and waits for it).
func (r *receiver) keepalive(ctx context.Context, q *sendq, done func() int64, flags uint8, on bool) (stop func()) {
	if !on {
		return func() {}
	}
	return r.f.everyKeepalive(func() error {
		a := q.frame(wire.Progress)
		a.flags = flags
		a.u64(uint64(done()))
		return q.put(ctx, a)
	})
}
