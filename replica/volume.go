package replica

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// VolumeOptions configure CreateVolume and OpenVolume.
type VolumeOptions struct {
	// Counter is the volume's revision counter mode. OpenVolume marks
	// replicas that recorded another mode (on versus off) ERR.
	Counter CounterMode
	// Salvage, with the counter off, keeps exactly one replica (Check).
	Salvage bool
	// Replica configures each replica (I/O mode, boot id, logger).
	Replica Options
}

// Validate reports options that cannot be used, with ErrInvalidOptions.
func (o *VolumeOptions) Validate() error {
	if o.Counter > CounterPerWrite {
		return fmt.Errorf("%w: unknown counter mode %d", ErrInvalidOptions, o.Counter)
	}
	return o.Replica.Validate()
}

// Member is one replica of a volume as the engine sees it.
type Member struct {
	Dir    string
	Mode   string // ModeRW or ModeERR
	Reason string
}

// Volume is the engine side of a replicated volume, in-process: it writes
// to every healthy replica and acknowledges a write when all of them
// completed it. A replica that fails is marked ERR, and before the next
// acknowledgement the survivors durably record a higher epoch, so the start
// check can never again pick the failed replica, with or without a counter.
//
// All methods are safe for concurrent use. Writes to the same block issued
// concurrently may land in different orders on different replicas, as on
// any block device; callers serialize writes they want ordered.
type Volume struct {
	opts    VolumeOptions
	healthy atomic.Pointer[[]*Replica] // RW: read from and written
	writers atomic.Pointer[[]*Replica] // RW and WO (rebuilding): written

	// io is held shared by every write, unmap and flush, exclusively by a
	// snapshot and by membership changes of a rebuild, so those see no
	// I/O in flight.
	io sync.RWMutex
	// locks serialize writes per 4 KiB block while a WO replica exists
	// (its unaligned writes are widened to whole blocks read from a RW
	// replica, so it never read-modify-writes data it has not received).
	locks blockLocks

	mu      sync.Mutex // membership changes
	epoch   uint64
	members []Member
	all     []*Replica // every opened replica, for Close
	wo      *Replica   // the write-only member of a running rebuild
	woErr   error      // why wo was dropped
	closed  bool

	isClosed atomic.Bool // lock-free copy of closed for the I/O path
	size     int64       // set before the volume is shared
}

// CreateVolume creates one replica per directory, all of one new volume.
func CreateVolume(dirs []string, size int64, o *VolumeOptions) (*Volume, error) {
	opts := orZero(o)
	if len(dirs) == 0 {
		return nil, errors.New("create volume: no replica directories")
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("create volume: %w", err)
	}
	ro := opts.Replica
	ro.Counter = opts.Counter
	vol := newID()
	v := &Volume{opts: opts}
	for _, d := range dirs {
		r, err := create(d, size, ro, vol)
		if err != nil {
			// Leave nothing that looks like a member of this volume.
			v.Close()
			for _, c := range v.all {
				removeNewReplica(c.Dir())
			}
			return nil, err
		}
		v.all = append(v.all, r)
		v.members = append(v.members, Member{Dir: d, Mode: ModeRW, Reason: "created"})
	}
	h := append([]*Replica(nil), v.all...)
	v.healthy.Store(&h)
	v.writers.Store(&h)
	v.size = size
	return v, nil
}

// OpenVolume runs the start check (Check) over dirs and opens the RW
// replicas. If some replica is ERR the survivors record a new epoch first,
// so a later start cannot take the ERR replica back. It fails with
// ErrNoHealthyReplica when the check leaves no replica RW.
func OpenVolume(dirs []string, o *VolumeOptions) (*Volume, error) {
	opts := orZero(o)
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("open volume: %w", err)
	}
	enabled := opts.Counter.Enabled()
	rep, err := Check(dirs, &CheckOptions{Counter: &enabled, Salvage: opts.Salvage, InspectOptions: InspectOptions{BootID: opts.Replica.BootID}})
	if err != nil {
		return nil, err
	}
	v := &Volume{opts: opts}
	anyERR := false
	for _, res := range rep.Replicas {
		v.members = append(v.members, Member{Dir: res.Dir, Mode: res.Mode, Reason: res.Reason})
		if res.Mode != ModeRW {
			anyERR = true
			continue
		}
		r, err := Open(res.Dir, &opts.Replica)
		if err != nil {
			v.Close()
			return nil, fmt.Errorf("open volume: %w", err)
		}
		v.all = append(v.all, r)
		v.epoch = max(v.epoch, r.Epoch())
	}
	h := append([]*Replica(nil), v.all...)
	v.healthy.Store(&h)
	v.writers.Store(&h)
	if len(v.all) > 0 {
		v.size = v.all[0].Size()
	}
	if anyERR {
		v.mu.Lock()
		err := v.bumpEpochLocked()
		v.mu.Unlock()
		if err != nil {
			v.Close()
			return nil, err
		}
	}
	return v, nil
}

// Members returns every replica's mode and the reason for it.
func (v *Volume) Members() []Member {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]Member(nil), v.members...)
}

// Epoch returns the current membership epoch.
func (v *Volume) Epoch() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.epoch
}

// Size returns the volume size.
func (v *Volume) Size() int64 { return v.size }

// fanout runs op on every healthy replica in parallel, and on the WO
// replica of a running rebuild when wo is set. Healthy replicas whose op
// fails are demoted (epoch bump on the others) before fanout returns nil;
// it fails only when no healthy replica is left. A WO replica that fails
// is dropped (its rebuild fails).
func (v *Volume) fanout(wo bool, op func(r *Replica) error) error {
	if v.isClosed.Load() {
		return ErrClosed
	}
	hs := *v.healthy.Load()
	if wo {
		hs = *v.writers.Load()
	}
	if len(hs) == 0 {
		return ErrNoHealthyReplica
	}
	var errs []error
	if len(hs) > 1 {
		errs = make([]error, len(hs))
		var wg sync.WaitGroup
		for i, r := range hs[1:] {
			wg.Go(func() { errs[i+1] = op(r) })
		}
		errs[0] = op(hs[0])
		wg.Wait()
	} else if err := op(hs[0]); err != nil {
		errs = []error{err}
	}
	var failed []*Replica
	for i, err := range errs {
		if err != nil {
			if v.dropWO(hs[i], err) {
				continue
			}
			failed = append(failed, hs[i])
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return v.demote(failed, errs)
}

// storeWritersLocked publishes healthy + wo as the write set.
func (v *Volume) storeWritersLocked() {
	w := append([]*Replica(nil), *v.healthy.Load()...)
	if v.wo != nil {
		w = append(w, v.wo)
	}
	v.writers.Store(&w)
}

// dropWO removes r from the write set if it is the WO replica, recording
// err for the rebuild; it reports whether r was the WO replica.
func (v *Volume) dropWO(r *Replica, err error) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.wo == nil || v.wo != r {
		return false
	}
	v.wo, v.woErr = nil, err
	v.storeWritersLocked()
	v.setMemberLocked(woTarget(r), ModeERR, err.Error())
	return true
}

func (v *Volume) setMemberLocked(dir, mode, reason string) {
	for i := range v.members {
		if v.members[i].Dir == dir {
			v.members[i].Mode, v.members[i].Reason = mode, reason
			return
		}
	}
	v.members = append(v.members, Member{Dir: dir, Mode: mode, Reason: reason})
}

// demote marks the failed replicas ERR and records a new epoch on the
// survivors before returning, so the caller may then acknowledge.
func (v *Volume) demote(failed []*Replica, errs []error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	changed := false
	for _, f := range failed {
		cause := f.Err()
		if cause == nil {
			cause = errors.Join(errs...)
		}
		changed = v.removeLocked(f, cause) || changed
	}
	if !changed {
		if len(*v.healthy.Load()) == 0 {
			return fmt.Errorf("%w: %w", ErrNoHealthyReplica, errors.Join(errs...))
		}
		return nil
	}
	return v.bumpEpochLocked()
}

func (v *Volume) removeLocked(f *Replica, cause error) bool {
	hs := *v.healthy.Load()
	var keep []*Replica
	for _, r := range hs {
		if r != f {
			keep = append(keep, r)
		}
	}
	if len(keep) == len(hs) {
		return false
	}
	v.healthy.Store(&keep)
	v.storeWritersLocked()
	for i := range v.members {
		if v.members[i].Dir == f.Dir() {
			v.members[i].Mode, v.members[i].Reason = ModeERR, cause.Error()
		}
	}
	return true
}

// bumpEpochLocked records epoch+1 on every healthy replica; one that fails
// is demoted too, and the bump repeats on the rest.
func (v *Volume) bumpEpochLocked() error {
	for {
		hs := *v.healthy.Load()
		if len(hs) == 0 {
			return ErrNoHealthyReplica
		}
		v.epoch++
		var bad *Replica
		var badErr error
		for _, r := range hs {
			if err := r.SetEpoch(v.epoch); err != nil {
				bad, badErr = r, err
				break
			}
		}
		if bad == nil {
			return nil
		}
		v.removeLocked(bad, badErr)
	}
}

// WriteAt writes p at off on every healthy replica (and the WO replica of
// a running rebuild).
func (v *Volume) WriteAt(p []byte, off int64) (int, error) {
	v.io.RLock()
	defer v.io.RUnlock()
	if len(*v.writers.Load()) > len(*v.healthy.Load()) && len(p) > 0 {
		return v.writeWidened(p, off)
	}
	if err := v.fanout(true, func(r *Replica) error { _, err := r.WriteAt(p, off); return err }); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeWidened writes while a WO replica exists: an unaligned write
// becomes a write of whole blocks, read first from a healthy replica, under
// the volume's block locks (exclusive for widened writes, shared for
// aligned ones), so every replica receives whole blocks.
func (v *Volume) writeWidened(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	if off < 0 || end > v.Size() {
		return 0, fmt.Errorf("%w: %d bytes at %d, size %d", ErrOutOfRange, len(p), off, v.Size())
	}
	a0, a1 := roundDown(off), roundUp(end)
	first, last := a0/BlockSize, (a1-1)/BlockSize
	aligned := a0 == off && a1 == end
	v.locks.lock(first, last, !aligned)
	defer v.locks.unlock(first, last, !aligned)
	buf := p
	if !aligned {
		buf = alignedBuf(int(a1 - a0))
		if _, err := v.readHealthy(buf, a0); err != nil {
			return 0, err
		}
		copy(buf[off-a0:], p)
	}
	if err := v.fanout(true, func(r *Replica) error { _, err := r.WriteAt(buf, a0); return err }); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unmap discards [off, off+n) on every healthy replica. While a rebuild
// runs it discards nothing and succeeds, as Longhorn does (a punch could
// race with the copy of data the WO replica has not received).
func (v *Volume) Unmap(off, n int64) error {
	v.io.RLock()
	defer v.io.RUnlock()
	if len(*v.writers.Load()) > len(*v.healthy.Load()) {
		return nil
	}
	return v.fanout(false, func(r *Replica) error { return r.Unmap(off, n) })
}

// Flush makes every acknowledged write durable on every healthy replica.
func (v *Volume) Flush() error {
	v.io.RLock()
	defer v.io.RUnlock()
	return v.fanout(true, func(r *Replica) error { return r.Flush() })
}

// Snapshot takes snapshot name on every healthy (and WO) replica, with no
// write in flight, so every replica's snapshot holds the same writes (opts: see
// Replica.Snapshot).
func (v *Volume) Snapshot(name string, opts *SnapshotOptions) error {
	if !validSnapshotName(name) {
		return fmt.Errorf("%w: %q", ErrBadName, name)
	}
	v.io.Lock()
	defer v.io.Unlock()
	return v.fanout(true, func(r *Replica) error { return r.Snapshot(name, opts) })
}

// ReadAt reads from the first healthy replica; one that fails is demoted
// and the next one is tried.
func (v *Volume) ReadAt(p []byte, off int64) (int, error) { return v.readHealthy(p, off) }

func (v *Volume) readHealthy(p []byte, off int64) (int, error) {
	for {
		if v.isClosed.Load() {
			return 0, ErrClosed
		}
		hs := *v.healthy.Load()
		if len(hs) == 0 {
			return 0, ErrNoHealthyReplica
		}
		n, err := hs[0].ReadAt(p, off)
		if err == nil || errors.Is(err, ErrOutOfRange) {
			return n, err
		}
		if derr := v.demote([]*Replica{hs[0]}, []error{err}); derr != nil {
			return 0, derr
		}
	}
}

// Close closes every replica (healthy ones cleanly).
func (v *Volume) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return ErrClosed
	}
	v.closed = true
	v.isClosed.Store(true)
	var errs []error
	for _, r := range v.all {
		if err := r.Close(); err != nil && r.Err() == nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeNewReplica deletes the files Create made in dir, volume.meta first
// (so the directory stops looking like a replica), and dir if it is empty.
func removeNewReplica(dir string) {
	for _, name := range []string{VolumeMetaFile, HeaderFile, LiveCounterFile, RevisionCounterFile, MetaName(HeadName(0)), HeadName(0)} {
		os.Remove(filepath.Join(dir, name))
	}
	os.Remove(dir)
}
