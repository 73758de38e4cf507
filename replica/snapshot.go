package replica

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Snapshot freezes the current head as volume-snap-NAME.img and continues
// on a new empty head volume-head-(N+1).img whose parent it is, as Longhorn
// does. It waits for the I/O in flight. A failure latches the replica.
func (r *Replica) Snapshot(name string) error {
	if !validSnapshotName(name) {
		return fmt.Errorf("%s: %w: %q", r.dir, ErrBadName, name)
	}
	r.gate.Lock()
	defer r.gate.Unlock()
	if r.closed {
		return fmt.Errorf("%s: %w", r.dir, ErrClosed)
	}
	if le := r.latched.Load(); le != nil {
		return le
	}
	snap := SnapshotName(name)
	if _, err := os.Lstat(filepath.Join(r.dir, snap)); err == nil {
		return fmt.Errorf("%s: snapshot %q: %w", r.dir, name, fs.ErrExist)
	}
	if err := r.snapshot(snap); err != nil {
		return r.fail(fmt.Errorf("snapshot %q: %w", name, err))
	}
	return nil
}

func (r *Replica) snapshot(snap string) error {
	if err := r.sync(false); err != nil {
		return err
	}
	old := r.vm.Head
	idx, ok := headIndex(old)
	if !ok {
		idx = -1
	}
	head := HeadName(idx + 1)
	path := filepath.Join(r.dir, head)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(r.size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	now := time.Now()
	if err := writeJSONAtomic(r.dir, MetaName(head), newDiskMeta(head, snap, now)); err != nil {
		return err
	}
	if err := os.Link(filepath.Join(r.dir, old), filepath.Join(r.dir, snap)); err != nil {
		return err
	}
	sm := newDiskMeta(snap, r.vm.Parent, now)
	sm.UserCreated = true
	if err := writeJSONAtomic(r.dir, MetaName(snap), sm); err != nil {
		return err
	}
	vm := r.vm
	vm.Head, vm.Parent = head, snap
	if err := writeJSONAtomic(r.dir, VolumeMetaFile, vm); err != nil {
		return err
	}
	r.vm = vm
	if err := os.Remove(filepath.Join(r.dir, old)); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(r.dir, MetaName(old))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := syncDir(r.dir); err != nil {
		return err
	}
	nf, _, err := openImage(path, os.O_RDWR, r.direct)
	if err != nil {
		return err
	}
	sf, _, err := openImage(filepath.Join(r.dir, snap), os.O_RDONLY, r.direct)
	if err != nil {
		nf.Close()
		return err
	}
	oldHead := r.layers[0]
	r.layers = append([]*os.File{nf, sf}, r.layers[1:]...)
	r.chain = append([]string{head, snap}, r.chain[1:]...)
	return oldHead.Close()
}
