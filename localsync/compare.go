package localsync

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"

	"github.com/sparsesync/sparsesync/sparse"
)

// compare reads [off, off+n) from both files and writes only the blocks
// that differ. Both blocks are in memory, so they are compared byte for
// byte: an unkeyed hash could let a crafted colliding block through, and
// costs more CPU than bytes.Equal. Where the destination's manifest holds
// the keyed digest of a range (a 64 KiB block, or the part of one a data
// extent covers; digests.go), the source's digest stands in for the
// destination's bytes, which are then not read.
func (w *worker) compare(off, n int64) error {
	e := w.e
	if err := e.ctx.Err(); err != nil {
		return err
	}
	sbuf, dbuf := w.buffers()
	s, d := sbuf[:n], dbuf[:n]
	var known []span // of s, where the destination holds these bytes (its manifest says)
	if e.prevCovers(off, n) {
		var err error
		if known, err = w.readVouched(s, d, off); err != nil {
			return err
		}
	} else {
		if err := w.readBoth(s, d, off); err != nil {
			return err
		}
		if e.dg != nil {
			if _, err := w.digestPiece(s, off); err != nil {
				return err
			}
		}
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
		for len(known) > 0 && known[0].hi <= p {
			known = known[1:]
		}
		k := same
		switch {
		case e.zeroScan && sparse.IsZero(s[p:q]):
			k = zero
		case len(known) > 0 && known[0].lo <= p && q <= known[0].hi:
			// the destination's block, vouched for by its digest
		case !equalKnown(s, d, p, q, known):
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

// readBoth reads [off, off+len(s)) of the source into s and of the
// destination into d, both at once: a cold comparison waits on the disk,
// and two reads in flight per worker keep its queue twice as deep.
//
// Cold ranges are read with O_DIRECT (coldread), not through the page
// cache. Reading through the cache was tried (9f63536) and looked faster
// only in back-to-back runs: on a VM whose balloon reports free pages to
// the host (Firecracker here), each page-cache page filled after a pause
// first faults its memory back from the host. With 8 s between runs, a
// steady 1 GiB dense re-sync took 1.34-1.79 s through the cache against
// 1.19-1.23 s direct, with twice the CPU (docs/benchmarks.md, "Buffered
// comparisons, measured after a pause").
func (w *worker) readBoth(s, d []byte, off int64) error {
	e := w.e
	if err := e.throttle(2*int64(len(s)), 0); err != nil {
		return err
	}
	dstErr := make(chan error, 1)
	go func() { dstErr <- e.readDst(d, off) }()
	err := e.readFull(s, off)
	if derr := <-dstErr; err == nil {
		err = derr
	}
	return err
}

// readVouched reads the source's [off, off+len(s)) into s, digests it, and
// reads into d only the parts of the destination that its manifest does
// not vouch for; it returns the vouched spans.
func (w *worker) readVouched(s, d []byte, off int64) ([]span, error) {
	e := w.e
	if err := e.throttle(int64(len(s)), 0); err != nil {
		return nil, err
	}
	if err := e.readFull(s, off); err != nil {
		return nil, err
	}
	known, err := w.digestPiece(s, off)
	if err != nil {
		return nil, err
	}
	lo, vouched := 0, 0
	for _, r := range append(known, span{len(s), len(s)}) {
		if r.lo > lo {
			if err := e.throttle(int64(r.lo-lo), 0); err != nil {
				return nil, err
			}
			if err := e.readDst(d[lo:r.lo], off+int64(lo)); err != nil {
				return nil, err
			}
		}
		vouched += r.hi - r.lo
		lo = r.hi
	}
	e.manifestBytes.Add(int64(vouched))
	return known, nil
}

// readDst reads the destination's [off, off+len(d)) into d.
func (e *engine) readDst(d []byte, off int64) error {
	if got, err := e.dstCold.ReadAt(e.dst.OS(), d, off); got < len(d) {
		return &fs.PathError{Op: "read", Path: e.dst.Name(), Err: fmt.Errorf("at offset %d: %w", off+int64(got), errOr(err, io.ErrUnexpectedEOF))}
	}
	return nil
}

// equalKnown compares s and d over [p, q), where d was not read over
// the part a known span covers (a comparison block that straddles a
// digest block's edge): there the destination holds s's bytes.
func equalKnown(s, d []byte, p, q int, known []span) bool {
	for _, r := range known {
		if r.lo >= q {
			break
		}
		if lo, hi := max(r.lo, p), min(r.hi, q); lo < hi {
			copy(d[lo:hi], s[lo:hi])
		}
	}
	return bytes.Equal(s[p:q], d[p:q])
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
	return e.writeRW(b, off)
}

func errOr(err, def error) error {
	if err == nil || err == io.EOF {
		return def
	}
	return err
}
