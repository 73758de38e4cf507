package replica

import (
	"fmt"
	"path/filepath"

	"github.com/sparsesync/sparsesync/internal/target"
)

// begin checks an I/O of n bytes at off and takes the I/O gate; the caller
// must call r.gate.RUnlock when it returns nil.
func (r *Replica) begin(off int64, n int) error {
	if le := r.latched.Load(); le != nil {
		return le
	}
	if off < 0 || off > r.size || int64(n) > r.size-off {
		return fmt.Errorf("%s: %w: %d bytes at %d, size %d", r.dir, ErrOutOfRange, n, off, r.size)
	}
	r.gate.RLock()
	if r.closed {
		r.gate.RUnlock()
		return fmt.Errorf("%s: %w", r.dir, ErrClosed)
	}
	return nil
}

// ReadAt reads len(p) bytes at off through the snapshot chain.
func (r *Replica) ReadAt(p []byte, off int64) (int, error) {
	if err := r.begin(off, len(p)); err != nil {
		return 0, err
	}
	defer r.gate.RUnlock()
	if err := r.read(p, off); err != nil {
		return 0, r.fail(err)
	}
	return len(p), nil
}

func (r *Replica) read(p []byte, off int64) error {
	if off%BlockSize == 0 && len(p)%BlockSize == 0 && (isAligned(p) || !r.direct) {
		return r.readBlocks(p, off)
	}
	bp := r.bounce.Get().(*[]byte)
	defer r.bounce.Put(bp)
	for len(p) > 0 {
		a := roundDown(off)
		n := min(roundUp(off+int64(len(p)))-a, bounceSize)
		buf := (*bp)[:n]
		if err := r.readBlocks(buf, a); err != nil {
			return err
		}
		c := copy(p, buf[off-a:])
		p, off = p[c:], off+int64(c)
	}
	return nil
}

// readBlocks reads a block-aligned range into an aligned buffer.
func (r *Replica) readBlocks(buf []byte, off int64) error {
	if len(r.layers) == 1 {
		_, err := r.layers[0].ReadAt(buf, off)
		return err
	}
	return resolveChain(r.layers, 0, off, off+int64(len(buf)), func(layer int, o, n int64) error {
		b := buf[o-off : o-off+n]
		if layer < 0 {
			clear(b)
			return nil
		}
		return readLayer(r.layers[layer], b, o)
	})
}

// WriteAt writes p at off. It returns only after the data reached the head
// (the kernel, not the disk: see Flush) and, with the counter on, was counted.
func (r *Replica) WriteAt(p []byte, off int64) (int, error) {
	if err := r.begin(off, len(p)); err != nil {
		return 0, err
	}
	defer r.gate.RUnlock()
	if len(p) == 0 {
		return 0, nil
	}
	end := off + int64(len(p))
	first, last := off/BlockSize, (end-1)/BlockSize
	exclusive := off%BlockSize != 0 || end%BlockSize != 0
	r.locks.lock(first, last, exclusive)
	err := r.write(p, off, end)
	r.locks.unlock(first, last, exclusive)
	if err == nil {
		err = r.count()
	}
	if err != nil {
		return 0, r.fail(err)
	}
	return len(p), nil
}

// injected asks the fault seam (Options.faults) about op on the file name
// of the replica directory.
func (r *Replica) injected(op target.Op, name string) error {
	return r.opts.faults.Inject(op, filepath.Join(r.dir, name))
}

func (r *Replica) write(p []byte, off, end int64) error {
	if err := r.injected(target.OpWrite, r.chain[0]); err != nil {
		return err
	}
	a0, a1 := roundUp(off), roundDown(end)
	if a0 > a1 { // inside one block
		return r.rmw(roundDown(off), p, off)
	}
	if off < a0 {
		if err := r.rmw(a0-BlockSize, p[:a0-off], off); err != nil {
			return err
		}
	}
	if a1 > a0 {
		if err := r.writeAligned(p[a0-off:a1-off], a0); err != nil {
			return err
		}
	}
	if end > a1 {
		return r.rmw(a1, p[a1-off:], a1)
	}
	return nil
}

// rmw writes data at off inside the block at blk: read the block through
// the chain, patch it, write the whole block to the head. The caller holds
// the block's stripe exclusively.
func (r *Replica) rmw(blk int64, data []byte, off int64) error {
	bp := r.bounce.Get().(*[]byte)
	defer r.bounce.Put(bp)
	buf := (*bp)[:BlockSize]
	if err := r.readBlocks(buf, blk); err != nil {
		return err
	}
	copy(buf[off-blk:], data)
	_, err := r.layers[0].WriteAt(buf, blk)
	return err
}

func (r *Replica) writeAligned(p []byte, off int64) error {
	if isAligned(p) || !r.direct {
		_, err := r.layers[0].WriteAt(p, off)
		return err
	}
	bp := r.bounce.Get().(*[]byte)
	defer r.bounce.Put(bp)
	for len(p) > 0 {
		n := copy(*bp, p)
		if _, err := r.layers[0].WriteAt((*bp)[:n], off); err != nil {
			return err
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}
