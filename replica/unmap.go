package replica

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sparsesync/sparsesync/sparse"
)

// Unmap discards [off, off+n): the 4 KiB-aligned interior is punched out of
// the head, partial blocks at the edges are left as they are (as Longhorn
// does). It counts as a revision.
//
// Below the head it follows Longhorn's UnmapAt (replica.go): the
// snapshots behind the head up to the first one with more than one child
// are the unmappable chain; with Options.UnmapMarkSnapChainRemoved each of
// them is first marked Removed in its .meta (Longhorn's
// unmapMarkDiskChainRemoved, done even for an unmap too small to punch),
// and the range is punched out of the head and every Removed one. Longhorn
// punches even when a snapshot that is not Removed remains below, exposing
// its older data; we then discard nothing instead (a discarded range may
// read as anything, and keeping the newest data is the safer choice).
// With no snapshot, or every snapshot below the head Removed, the result
// reads exactly as Longhorn's does: zeros, or the backing file's data.
func (r *Replica) Unmap(off, n int64) error {
	if n < 0 || n > int64(int(^uint(0)>>1)) {
		return fmt.Errorf("%s: %w: unmap %d bytes", r.dir, ErrOutOfRange, n)
	}
	if err := r.begin(off, int(n)); err != nil {
		return err
	}
	defer r.gate.RUnlock()
	a0, a1 := roundUp(off), roundDown(off+n)
	punch, ok, err := r.unmappable()
	if err == nil && a1 > a0 && ok {
		first, last := a0/BlockSize, (a1-1)/BlockSize
		r.locks.lock(first, last, false)
		_, err = sparse.PunchHole(r.layers[0], a0, a1-a0)
		for _, img := range punch {
			if err != nil {
				break
			}
			err = punchImage(filepath.Join(r.dir, img), a0, a1-a0)
		}
		r.locks.unlock(first, last, false)
	}
	if err == nil {
		err = r.count()
	}
	if err != nil {
		return r.fail(err)
	}
	return nil
}

// unmappable returns the snapshot images an unmap punches besides the
// head, and whether it punches at all (not when that would expose a
// snapshot's older data). The caller holds the gate (shared).
func (r *Replica) unmappable() (punch []string, ok bool, err error) {
	if len(r.chain) == 1 {
		return nil, true, nil
	}
	r.metaMu.Lock()
	defer r.metaMu.Unlock()
	whole := true
	for _, img := range r.chain[1:] {
		if r.children[img] > 1 {
			whole = false
			break
		}
		if r.opts.UnmapMarkSnapChainRemoved && !r.removed[img] {
			if err := markRemoved(r.dir, img); err != nil {
				return nil, false, fmt.Errorf("mark %s removed before unmap: %w", img, err)
			}
			r.removed[img] = true
		}
		if !r.removed[img] {
			whole = false
			continue
		}
		punch = append(punch, img)
	}
	return punch, whole, nil
}

// punchImage punches [off, off+n) out of a snapshot image (the chain holds
// them read-only).
func punchImage(path string, off, n int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	_, err = sparse.PunchHole(f, off, n)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// markRemoved sets Removed in dir/IMG.meta (Longhorn's markDiskAsRemoved).
func markRemoved(dir, img string) error {
	dm, err := ReadDiskMeta(dir, img)
	if err != nil {
		return err
	}
	dm.Removed = true
	return writeJSONAtomic(dir, MetaName(img), dm)
}

// diskTree reads every image .meta of dir, as Longhorn's readMetadata
// does: how many children each image has and which are marked Removed.
func diskTree(dir string) (children map[string]int, removed map[string]bool, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	children, removed = map[string]int{}, map[string]bool{}
	for _, e := range ents {
		img, ok := strings.CutSuffix(e.Name(), metaSuffix)
		if !ok || !strings.HasSuffix(img, imgSuffix) || e.IsDir() {
			continue
		}
		dm, err := ReadDiskMeta(dir, img)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, e.Name()), err)
		}
		if dm.Parent != "" {
			children[dm.Parent]++
		}
		removed[img] = dm.Removed
	}
	return children, removed, nil
}
