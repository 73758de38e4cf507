package replica

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ModeWO is the mode of a replica that receives writes but is not read
// from: the target of a running AddReplica.
const ModeWO = "WO"

// AddOptions configure Volume.AddReplica.
type AddOptions struct {
	// Copy copies the named files (images and .meta) from the source
	// replica directory into the staging directory, verified and synced:
	// the data path of the rebuild (package replica/rebuild gives the
	// local copy with its TCP fallback). It is required.
	Copy func(ctx context.Context, source, stage string, names []string) error
	// Fault, when set, is called after each step of the staging protocol
	// (see NewStage); its error fails the step (tests only).
	Fault func(step, name string) error
}

// Added says what AddReplica did.
type Added struct {
	Source   string // the healthy replica copied from
	Revision int64  // the revision count given to the new replica
}

// AddReplica rebuilds the replica directory target from the volume's
// first healthy replica while the volume keeps taking writes, and adds it
// as a healthy (RW) member, the way Longhorn's engine does:
//
//	demote target's older copy into target/StagingDir (as Rebuild does);
//	there: volume.meta := Rebuilding; an empty head named as the source's
//	join the volume write-only (WO): every write from now on reaches it;
//	    unaligned writes are widened to whole blocks read from a RW replica
//	snapshot every member (no write in flight): the source's snapshots are
//	    now immutable and hold every write the target missed
//	copy each snapshot image and .meta to the target (opts.Copy)
//	with no write in flight: the staged copy gets the source's revision
//	    counter and the volume's epoch, Rebuilding is cleared, it is
//	    published (the head's .meta last: the commit), reopens and
//	    becomes RW; the epoch is bumped on every member
//
// Unmaps are no-ops while the rebuild runs. Until the commit the target's
// top level holds nothing Longhorn or we would open, even if the process
// is killed. On failure the target is dropped, closed and its incomplete
// copy removed (as a failed Rebuild's); the volume goes on with its other
// members. Package replica/rebuild's AddReplica calls it with its copy.
func (v *Volume) AddReplica(ctx context.Context, target string, o *AddOptions) (Added, error) {
	opts := orZero(o)
	var add Added
	if opts.Copy == nil {
		return add, fmt.Errorf("add replica %s: no copy function", target)
	}
	stage := NewStage(target, opts.Fault)
	src, wo, tlock, err := v.joinWO(stage)
	if err != nil {
		return add, fmt.Errorf("add replica %s: %w", target, err)
	}
	defer func() {
		if tlock != nil {
			tlock.Close()
		}
	}()
	add.Source = src.Dir()
	names, err := v.freeze(src, wo)
	if err == nil {
		err = opts.Copy(ctx, src.Dir(), stage.Dir(), names)
	}
	if err == nil {
		err = syncDir(stage.Dir())
	}
	if err != nil {
		return add, fmt.Errorf("add replica %s: %w", target, v.abortWO(wo, err))
	}
	add.Revision, err = v.switchRW(src, wo, stage, names, &tlock)
	if err != nil {
		return add, fmt.Errorf("add replica %s: %w", target, err)
	}
	return add, nil
}

// joinWO prepares the target of stage and joins it to the volume
// write-only, with no I/O in flight. It returns the source (the first
// healthy replica), the WO replica and the lock on the target.
func (v *Volume) joinWO(stage *Stage) (src, wo *Replica, lock *os.File, err error) {
	v.io.Lock()
	defer v.io.Unlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	hs := *v.healthy.Load()
	switch {
	case v.closed:
		return nil, nil, nil, ErrClosed
	case v.wo != nil:
		return nil, nil, nil, errors.New("another rebuild is running")
	case len(hs) == 0:
		return nil, nil, nil, ErrNoHealthyReplica
	}
	src = hs[0]
	if wo, lock, err = prepareTarget(src, stage, v.opts.Replica); err != nil {
		return nil, nil, nil, err
	}
	v.wo, v.woErr = wo, nil
	v.all = append(v.all, wo)
	v.storeWritersLocked()
	v.setMemberLocked(stage.Target(), ModeWO, "rebuilding")
	return src, wo, lock, nil
}

// freeze snapshots every member, so the source's snapshots hold every
// write the WO replica missed, and returns the files to copy: every disk
// the source lists (as Longhorn's rebuild copies them, SourceFiles), the
// off-chain ones first, then the snapshots, oldest first, all immutable.
func (v *Volume) freeze(src, wo *Replica) ([]string, error) {
	if err := v.Snapshot("rebuild-"+newID().String()[:12], &SnapshotOptions{System: true}); err != nil { // a system snapshot, as Longhorn's rebuild takes
		return nil, err
	}
	if err := v.woFailed(wo); err != nil {
		return nil, err
	}
	src.gate.RLock()
	full := append([]string(nil), src.chain...)
	src.gate.RUnlock()
	extra, err := offChainDisks(src.Dir(), full)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, img := range extra {
		names = append(names, img, MetaName(img))
	}
	return append(names, ChainFiles(full[1:])...), nil // full[1:]: the snapshots, newest first
}

// abortWO takes the WO replica out of the write set after a failed copy,
// marks it ERR, and discards it; it returns err joined with any failure
// to remove the copy.
func (v *Volume) abortWO(wo *Replica, err error) error {
	v.io.Lock()
	v.mu.Lock()
	if v.wo == wo {
		v.wo = nil
		v.storeWritersLocked()
		v.setMemberLocked(woTarget(wo), ModeERR, err.Error())
	}
	v.mu.Unlock()
	v.io.Unlock()
	return v.discardTarget(wo, err)
}

// switchRW, with no I/O in flight, gives the fully copied WO replica the
// source's count and the volume's epoch, publishes it, reopens it and
// makes it RW; then the epoch is bumped on every member. It closes the
// target's lock (*lock = nil) before reopening. It returns the count.
func (v *Volume) switchRW(src, wo *Replica, stage *Stage, names []string, lock **os.File) (int64, error) {
	v.io.Lock()
	defer v.io.Unlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	target := stage.Target()
	if v.wo != wo {
		return 0, v.discardTargetLocked(wo, fmt.Errorf("dropped: %w", v.woErr))
	}
	rev := src.Revision()
	err := wo.Close()
	if err == nil {
		err = setRebuilt(stage.Dir(), rev, v.epoch)
	}
	if err == nil {
		head := wo.vm.Head
		err = stage.Publish(append(names, head, MetaName(head)))
	}
	(*lock).Close()
	*lock = nil
	var r *Replica
	if err == nil {
		r, err = Open(target, &v.opts.Replica)
	}
	if err != nil {
		if !committed(target) {
			err = errors.Join(err, purgeFailed(target))
		}
		v.wo = nil
		v.storeWritersLocked()
		v.setMemberLocked(target, ModeERR, err.Error())
		return 0, err
	}
	v.wo = nil
	v.all = slices.DeleteFunc(v.all, func(x *Replica) bool { return x == wo })
	v.all = append(v.all, r)
	h := append(append([]*Replica(nil), *v.healthy.Load()...), r)
	v.healthy.Store(&h)
	v.storeWritersLocked()
	v.setMemberLocked(target, ModeRW, "rebuilt")
	return rev, v.bumpEpochLocked()
}

// discardTarget closes the dropped WO target of a failed AddReplica,
// takes it out of the volume and removes what it left in its directory
// (purgeFailed, as a failed Rebuild does): a head that took some of the
// volume's writes, the snapshots copied so far and their .meta. Longhorn
// would open that directory whatever its Rebuilding flag says (and with
// the counter off its start check would keep it RW), so nothing of it may
// stay. The caller has taken wo out of the write set; v.mu is not held.
func (v *Volume) discardTarget(wo *Replica, cause error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.discardTargetLocked(wo, cause)
}

// discardTargetLocked is discardTarget with v.mu held (no write reaches
// wo: it is out of the write set). It returns cause, joined with any
// failure to remove the copy.
func (v *Volume) discardTargetLocked(wo *Replica, cause error) error {
	v.all = slices.DeleteFunc(v.all, func(x *Replica) bool { return x == wo })
	wo.Close() // it may have latched an error: the files go anyway
	if err := purgeFailed(woTarget(wo)); err != nil {
		return errors.Join(cause, fmt.Errorf("removing the incomplete copy: %w", err))
	}
	return cause
}

// woFailed returns why the WO replica was dropped, if it was.
func (v *Volume) woFailed(wo *Replica) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.wo != wo {
		return fmt.Errorf("dropped: %w", v.woErr)
	}
	return nil
}

// woTarget is the target directory of the WO replica r of AddReplica,
// which lives in the target's staging directory.
func woTarget(r *Replica) string { return filepath.Dir(r.Dir()) }

// prepareTarget locks target, demotes an older copy there into the
// staging directory (so it stops being adoptable; its snapshot images
// are kept, the copy then writes only what differs) and prepares the
// staging directory as a replica marked Rebuilding: src's head name,
// volume id and counter mode, an empty head. It returns the staged
// replica, open, and the lock on target.
func prepareTarget(src *Replica, st *Stage, opts Options) (wo *Replica, lock *os.File, err error) {
	target := st.Target()
	if SameDir(src.Dir(), target) {
		return nil, nil, errors.New("source and target are the same directory")
	}
	if err := os.MkdirAll(target, 0o700); err != nil {
		return nil, nil, err
	}
	if lock, err = LockDir(target); err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			if wo != nil {
				wo.Close()
				wo = nil
			}
			if perr := purgeFailed(target); perr != nil {
				err = errors.Join(err, fmt.Errorf("removing the incomplete copy: %w", perr))
			}
			lock.Close()
			lock = nil
		}
	}()
	if err := st.Demote(); err != nil {
		return nil, nil, err
	}
	stage := st.Dir()
	src.gate.RLock()
	head := src.vm.Head
	src.gate.RUnlock()
	vm := VolumeMeta{Size: src.size, Head: head, SectorSize: 512}
	if err := markRebuilding(stage, vm); err != nil {
		return nil, nil, err
	}
	// Keep old snapshot images (the copy then writes only what differs);
	// drop every head, their metas and the old counter state.
	ents, err := os.ReadDir(stage)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		n := e.Name()
		if _, ok := headIndex(n); ok || (isChainFile(n) && strings.HasPrefix(n, headPrefix)) ||
			n == LiveCounterFile || n == HeaderFile || n == RevisionCounterFile {
			if err := os.Remove(filepath.Join(stage, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, nil, err
			}
		}
	}
	f, err := os.OpenFile(filepath.Join(stage, head), os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode(head))
	if err != nil {
		return nil, nil, err
	}
	err = f.Truncate(src.size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, err
	}
	if err := writeJSONAtomic(stage, MetaName(head), newDiskMeta(head, "", time.Now())); err != nil {
		return nil, nil, err
	}
	src.hmu.Lock()
	sh := src.hf.cur
	src.hmu.Unlock()
	if sh.mode.Enabled() {
		if err := writeFileAtomic(stage, RevisionCounterFile, FormatRevisionCounter(0)); err != nil {
			return nil, nil, err
		}
	}
	boot, err := opts.bootID()
	if err != nil {
		return nil, nil, err
	}
	id, err := identOf(filepath.Join(stage, head))
	if err != nil {
		return nil, nil, err
	}
	h := header{gen: 1, mode: sh.mode, clean: true, epoch: sh.epoch, volumeID: sh.volumeID, replicaID: newID(), bootID: boot, head: id}
	b := make([]byte, headerFileSize)
	h.encode(b[:headerSlotSize])
	if err := writeFileAtomic(stage, HeaderFile, b); err != nil {
		return nil, nil, err
	}
	opts.rebuilding = true
	wo, err = Open(stage, &opts)
	return wo, lock, err
}

// setRebuilt gives a closed, fully copied staged replica the revision
// count rev and the epoch, and clears Rebuilding: publish may move it.
func setRebuilt(target string, rev int64, epoch uint64) error {
	h, _, ok, err := readHeaderSlot(filepath.Join(target, HeaderFile))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s: %w: no %s", target, ErrCorrupt, HeaderFile)
	}
	if h.mode.Enabled() {
		if err := writeFileAtomic(target, RevisionCounterFile, FormatRevisionCounter(rev)); err != nil {
			return err
		}
	}
	vm, err := ReadVolumeMeta(target)
	if err != nil {
		return err
	}
	if h.head, err = identOf(filepath.Join(target, vm.Head)); err != nil {
		return err
	}
	h.gen++
	h.writeSeq, h.clean, h.epoch = uint64(max(rev, 0)), true, epoch
	h.rcSeq = h.writeSeq
	b := make([]byte, headerFileSize)
	h.encode(b[:headerSlotSize])
	if err := writeFileAtomic(target, HeaderFile, b); err != nil {
		return err
	}
	os.Remove(filepath.Join(target, LiveCounterFile))
	vm.Rebuilding, vm.Dirty = false, false
	return writeJSONAtomic(target, VolumeMetaFile, vm)
}
