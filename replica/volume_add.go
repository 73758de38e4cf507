package replica

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sparsesync/sparsesync/localsync"
)

// ModeWO is the mode of a replica that receives writes but is not read
// from: the target of a running AddReplica.
const ModeWO = "WO"

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
//	copy each snapshot image and .meta to the target (local first, TCP
//	    fallback from opts.Remote as in Rebuild), verified and synced
//	with no write in flight: the staged copy gets the source's revision
//	    counter and the volume's epoch, Rebuilding is cleared, it is
//	    published (the head's .meta last: the commit), reopens and
//	    becomes RW; the epoch is bumped on every member
//
// Only opts.Remote, RemoteDir, TCP and Logger are used. Unmaps are no-ops
// while the rebuild runs. Until the commit the target's top level holds
// nothing Longhorn or we would open, even if the process is killed. On
// failure the target is dropped, closed and its incomplete copy removed
// (as a failed Rebuild's); the volume goes on with its other members.
func (v *Volume) AddReplica(ctx context.Context, target string, opts *RebuildOptions) (RebuildStats, error) {
	start := time.Now()
	var o RebuildOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	st := RebuildStats{Target: target, Path: PathLocal}
	fail := func(err error) (RebuildStats, error) {
		st.Elapsed = time.Since(start)
		return st, fmt.Errorf("replica: add replica %s: %w", target, err)
	}

	// Prepare the target and join it write-only, with no I/O in flight.
	v.io.Lock()
	v.mu.Lock()
	hs := *v.healthy.Load()
	switch {
	case v.closed:
		v.mu.Unlock()
		v.io.Unlock()
		return fail(ErrClosed)
	case v.wo != nil:
		v.mu.Unlock()
		v.io.Unlock()
		return fail(errors.New("another rebuild is running"))
	case len(hs) == 0:
		v.mu.Unlock()
		v.io.Unlock()
		return fail(ErrNoHealthyReplica)
	}
	src := hs[0]
	st.Source = src.Dir()
	wo, tlock, err := prepareTarget(src, target, v.opts.Replica, &o)
	defer func() {
		if tlock != nil {
			tlock.Close()
		}
	}()
	if err == nil {
		v.wo, v.woErr = wo, nil
		v.all = append(v.all, wo)
		v.storeWritersLocked()
		v.setMemberLocked(target, ModeWO, "rebuilding")
	}
	v.mu.Unlock()
	v.io.Unlock()
	if err != nil {
		return fail(err)
	}
	abort := func(err error) (RebuildStats, error) {
		v.io.Lock()
		v.mu.Lock()
		if v.wo == wo {
			v.wo = nil
			v.storeWritersLocked()
			v.setMemberLocked(target, ModeERR, err.Error())
		}
		v.mu.Unlock()
		v.io.Unlock()
		return fail(v.discardTarget(wo, err))
	}

	// Freeze what the target missed into snapshots on every member.
	if err := v.Snapshot("rebuild-"+newID().String()[:12], SnapshotOptions{}); err != nil { // a system snapshot, as Longhorn's rebuild takes
		return abort(err)
	}
	if err := v.woFailed(wo); err != nil {
		return abort(err)
	}
	src.gate.RLock()
	full := append([]string(nil), src.chain...)
	src.gate.RUnlock()
	chain := full[1:] // the snapshots, newest first
	// Every disk the source lists, as Longhorn's rebuild copies them
	// (sourceFiles): the off-chain ones first, immutable like the snapshots.
	extra, err := offChainDisks(src.Dir(), full)
	if err != nil {
		return abort(err)
	}
	var names []string
	for _, img := range extra {
		names = append(names, img, MetaName(img))
	}
	names = append(names, chainFiles(chain)...)

	stage := wo.Dir()
	files, err := copyLocal(ctx, src.Dir(), stage, names, &o)
	if err != nil && o.Remote != "" && ctx.Err() == nil {
		st.FallbackReason, st.Path = err.Error(), PathLocalTCP
		o.Logger.Warn("replica add: local copy failed, falling back to TCP",
			"source", src.Dir(), "target", target, "remote", o.Remote, "err", err)
		if o.RemoteDir == "" {
			o.RemoteDir = filepath.Base(src.Dir())
		}
		files, err = copyTCP(ctx, stage, names, &o)
	}
	st.Files = files
	if err != nil {
		return abort(err)
	}
	if err := syncDir(stage); err != nil {
		return abort(err)
	}

	// Switch WO -> RW with no I/O in flight.
	v.io.Lock()
	defer v.io.Unlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.wo != wo {
		st.Elapsed = time.Since(start)
		return st, fmt.Errorf("replica: add replica %s: %w", target, v.discardTargetLocked(wo, fmt.Errorf("dropped: %w", v.woErr)))
	}
	rev := src.Revision()
	err = wo.Close()
	if err == nil {
		err = setRebuilt(stage, rev, v.epoch)
	}
	if err == nil {
		head := wo.vm.Head
		err = publish(target, append(names, head, MetaName(head)), &o)
	}
	tlock.Close()
	tlock = nil
	var r *Replica
	if err == nil {
		r, err = Open(target, v.opts.Replica)
	}
	if err != nil {
		if !committed(target) {
			err = errors.Join(err, purgeFailed(target))
		}
		v.wo = nil
		v.storeWritersLocked()
		v.setMemberLocked(target, ModeERR, err.Error())
		st.Elapsed = time.Since(start)
		return st, fmt.Errorf("replica: add replica %s: %w", target, err)
	}
	v.wo = nil
	v.all = slices.DeleteFunc(v.all, func(x *Replica) bool { return x == wo })
	v.all = append(v.all, r)
	h := append(append([]*Replica(nil), *v.healthy.Load()...), r)
	v.healthy.Store(&h)
	v.storeWritersLocked()
	v.setMemberLocked(target, ModeRW, "rebuilt")
	st.Revision = rev
	if err := v.bumpEpochLocked(); err != nil {
		st.Elapsed = time.Since(start)
		return st, err
	}
	st.Elapsed = time.Since(start)
	return st, nil
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
func prepareTarget(src *Replica, target string, opts Options, o *RebuildOptions) (wo *Replica, lock *os.File, err error) {
	if sameDir(src.Dir(), target) {
		return nil, nil, errors.New("source and target are the same directory")
	}
	if err := os.MkdirAll(target, 0o700); err != nil {
		return nil, nil, err
	}
	if lock, err = lockDir(target); err != nil {
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
	stage, err := demote(target, o)
	if err != nil {
		return nil, nil, err
	}
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
	wo, err = Open(stage, opts)
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

// copyLocal copies names from source to target with localsync, verifying
// each; on error it removes the files it created.
func copyLocal(ctx context.Context, source, target string, names []string, o *RebuildOptions) (files []RebuildFile, err error) {
	var created []string
	defer func() {
		if err != nil {
			for _, p := range slices.Backward(created) {
				os.Remove(p)
			}
		}
	}()
	for _, name := range names {
		if err := o.injected("local", name); err != nil {
			return files, err
		}
		src, dst := filepath.Join(source, name), filepath.Join(target, name)
		if _, err := os.Lstat(dst); err != nil {
			created = append(created, dst)
		}
		cst, err := localsync.Copy(ctx, src, dst, localsync.Options{Logger: o.Logger, Budget: o.Budget})
		if err != nil {
			return files, err
		}
		if err := verifyCopy(ctx, src, dst, o.Budget.Read); err != nil {
			return files, err
		}
		files = append(files, RebuildFile{Name: name, CopiedBytes: cst.CopiedBytes, ClonedBytes: cst.ClonedBytes, UnchangedBytes: cst.UnchangedBytes, Throttled: cst.Throttled})
	}
	return files, nil
}
