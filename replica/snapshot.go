package replica

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// SnapshotOptions are what Longhorn's Snapshot records in the snapshot's
// .meta besides its name (replica.go Snapshot(name, userCreated, created,
// labels)). The zero value (and nil) is a user-created snapshot with no
// labels, taken now.
type SnapshotOptions struct {
	// System marks a system snapshot (Longhorn's expansion and rebuild
	// snapshots, which Longhorn's purge may remove): the .meta's
	// UserCreated is false. The default is a snapshot the user asked for.
	System bool
	// Labels are stored as is (nil is written as null, as Longhorn does).
	Labels map[string]string
	// Created is the creation time; zero means now.
	Created time.Time
}

// Snapshot freezes the current head as volume-snap-NAME.img and continues
// on a new empty head volume-head-(N+1).img whose parent it is, as Longhorn
// does. opts nil means the defaults (a user-created snapshot with no
// labels, taken now). It waits for the I/O in flight. A failure latches the
// replica.
func (r *Replica) Snapshot(name string, opts *SnapshotOptions) error {
	var so SnapshotOptions
	if opts != nil {
		so = *opts
	}
	if so.Created.IsZero() {
		so.Created = time.Now()
	}
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
	if err := r.snapshot(snap, so); err != nil {
		return r.fail(fmt.Errorf("snapshot %q: %w", name, err))
	}
	return nil
}

func (r *Replica) snapshot(snap string, so SnapshotOptions) error {
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
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode(head))
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
	now := so.Created
	if err := writeJSONAtomic(r.dir, MetaName(head), newDiskMeta(head, snap, now)); err != nil {
		return err
	}
	if err := os.Link(filepath.Join(r.dir, old), filepath.Join(r.dir, snap)); err != nil {
		return err
	}
	sm := newDiskMeta(snap, r.vm.Parent, now)
	sm.UserCreated, sm.Labels = !so.System, so.Labels
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
	// Later header writes name the new head (the old one stays in the
	// chain as the snapshot, a hard link: the header keeps matching).
	if id, err := identOf(path); err == nil {
		r.hmu.Lock()
		r.head = id
		r.hmu.Unlock()
	}
	sf, _, err := openImage(filepath.Join(r.dir, snap), os.O_RDONLY, r.direct)
	if err != nil {
		nf.Close()
		return err
	}
	oldHead := r.layers[0]
	r.layers = append([]*os.File{nf, sf}, r.layers[1:]...)
	r.chain = append([]string{head, snap}, r.chain[1:]...)
	r.metaMu.Lock()
	r.children[snap], r.removed[snap] = 1, false
	r.metaMu.Unlock()
	return oldHead.Close()
}
