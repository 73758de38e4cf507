package replica

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sparsesync/sparsesync/internal/dirlock"
	"github.com/sparsesync/sparsesync/internal/target"
)

// Create makes a new replica of size bytes (a positive multiple of 4096) in
// dir, creating dir if needed, and opens it. volume.meta is written last, so
// an interrupted Create never leaves a directory that looks like a replica;
// a failed one removes what it created. nil options are the defaults.
func Create(dir string, size int64, o *Options) (*Replica, error) {
	return create(dir, size, orZero(o), newID())
}

func create(dir string, size int64, opts Options, volumeID ID) (_ *Replica, err error) {
	if size <= 0 || size%BlockSize != 0 {
		return nil, fmt.Errorf("create replica %s: size %d is not a positive multiple of %d", dir, size, BlockSize)
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("create replica %s: %w", dir, err)
	}
	mode := opts.Counter
	boot, err := opts.bootID()
	if err != nil {
		return nil, err
	}
	var created []string
	defer func() {
		if err != nil {
			for i := len(created) - 1; i >= 0; i-- {
				os.Remove(created[i])
			}
		}
	}()
	if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		created = append(created, dir)
	}
	if _, err := os.Lstat(filepath.Join(dir, VolumeMetaFile)); err == nil {
		return nil, fmt.Errorf("%s: %w", dir, ErrExists)
	}
	head := HeadName(0)
	path := filepath.Join(dir, head)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode(head))
	if err != nil {
		return nil, err
	}
	created = append(created, path)
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	write := func(name string, data []byte) error {
		created = append(created, filepath.Join(dir, name))
		return writeFileAtomic(dir, name, data)
	}
	dm, _ := json.Marshal(newDiskMeta(head, "", time.Now()))
	if err := write(MetaName(head), dm); err != nil {
		return nil, err
	}
	if mode.Enabled() {
		if err := write(RevisionCounterFile, FormatRevisionCounter(0)); err != nil {
			return nil, err
		}
	}
	id, err := identOf(path)
	if err != nil {
		return nil, err
	}
	h := header{mode: mode, clean: true, volumeID: volumeID, replicaID: newID(), bootID: boot, gen: 1, head: id}
	b := make([]byte, headerFileSize)
	h.encode(b[:headerSlotSize])
	if err := write(HeaderFile, b); err != nil {
		return nil, err
	}
	vm, _ := json.Marshal(VolumeMeta{Size: size, Head: head, SectorSize: 512})
	if err := write(VolumeMetaFile, vm); err != nil {
		return nil, err
	}
	created = append(created, filepath.Join(dir, LiveCounterFile))
	return Open(dir, &opts)
}

// Open opens the replica in dir for writing: ours, or one Longhorn wrote
// (whose counter mode is taken from the presence of revision.counter, since
// Longhorn does not record it; opening records it in replica.hdr).
func Open(dir string, o *Options) (_ *Replica, err error) {
	opts := orZero(o)
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("open replica %s: %w", dir, err)
	}
	boot, err := opts.bootID()
	if err != nil {
		return nil, err
	}
	r := &Replica{dir: dir, opts: opts, log: opts.Logger, bootID: boot, bounce: newBouncePool()}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.fcond = sync.NewCond(&r.fmu)
	defer func() {
		if err != nil {
			r.closeFiles()
		}
	}()
	// One writer per directory: two (a live upgrade gone wrong, #1235 in
	// the design note) would make counters and data diverge.
	if r.dirLock, err = LockDir(dir); err != nil {
		return nil, err
	}
	chain, vm, err := chainOf(dir, opts.rebuilding)
	if err != nil {
		return nil, err
	}
	// A rebuild killed after its commit may have left its staging
	// directory (chainOf refuses one before the commit): it is ours alone.
	if err := os.RemoveAll(stagingPath(dir)); err != nil {
		return nil, err
	}
	if vm.Size%BlockSize != 0 {
		return nil, corruptf(filepath.Join(dir, VolumeMetaFile), "size %d is not a multiple of %d", vm.Size, BlockSize)
	}
	r.size, r.vm, r.chain = vm.Size, vm, chain

	cs, rc, err := r.judgeCounters(chain)
	if err != nil {
		return nil, err
	}
	h, haveHdr := cs.hdr, cs.haveHdr
	if !haveHdr {
		// A Longhorn directory: adopt it, in the mode its files say.
		h = header{volumeID: newID(), replicaID: newID(), clean: !vm.Dirty, mode: cs.mode}
	}
	r.mode = h.mode
	var start uint64
	if r.mode.Enabled() {
		if start, err = r.openCounters(cs, rc, &h); err != nil {
			return nil, err
		}
	}
	if err := r.openHeader(h, cs.slot, haveHdr, start); err != nil {
		return nil, err
	}
	if err := r.openLayers(chain, vm); err != nil {
		return nil, err
	}
	vm.Dirty = true
	if err := writeJSONAtomic(dir, VolumeMetaFile, vm); err != nil {
		return nil, err
	}
	r.vm = vm
	r.log.Debug("replica opened", "dir", dir, "mode", r.mode.String(), "revision", start, "chain", len(chain), "direct", r.direct)
	return r, nil
}

// judgeCounters reads and judges the counter files of r's directory
// (incarnation.go) and logs a leftover header (openHeader replaces it).
// It sets r.head and returns revision.counter's bytes.
func (r *Replica) judgeCounters(chain []string) (counterState, []byte, error) {
	dir := r.dir
	cf, ids, err := readCounters(dir, chain)
	if err != nil {
		return counterState{}, nil, err
	}
	cs, err := cf.judge(dir, ids, r.bootID)
	if err != nil {
		return counterState{}, nil, err
	}
	if cs.rcErr != nil {
		return counterState{}, nil, cs.rcErr
	}
	r.head = ids[0]
	if cs.ignored != "" {
		// Left by an earlier replica in this directory (Longhorn's
		// Delete keeps our files): openHeader replaces it whole with a
		// header of our own (and openLive rewrites live.counter, whose
		// page names the old replica until then, so it is ignored).
		// Neither is removed first: a kill in between would take the
		// source of a rebuild its header, or leave an empty one.
		r.log.Warn("replica: ignoring a leftover replica.hdr", "dir", dir, "reason", cs.ignored)
	}
	return cs, cf.rc, nil
}

// openCounters, with the counter on, opens the live page and
// revision.counter at the count the directory holds, which it returns;
// h's persisted count is raised to revision.counter's (rc, its bytes).
func (r *Replica) openCounters(cs counterState, rc []byte, h *header) (start uint64, err error) {
	dir := r.dir
	// Our count continues from every write the directory holds; the
	// counter never moves backwards. Writes of another writer on top
	// of an unclean count of ours are added to it: opening the
	// replica for writing takes it as the one that holds them.
	start = uint64(cs.total())
	if cs.foreign > 0 {
		r.log.Warn("replica: revision.counter moved past the count we last wrote: adopting another writer's writes",
			"dir", dir, "own", cs.own, "foreign_at_least", cs.foreign)
	}
	// The page first: it says revision.counter holds start before
	// it does, which a kill in between cannot make wrong (start is
	// at least what revision.counter holds).
	if r.live, err = openLive(filepath.Join(dir, LiveCounterFile), h.replicaID, r.bootID, start, start); err != nil {
		return 0, err
	}
	flag := os.O_RDWR | os.O_CREATE
	rcPath := filepath.Join(dir, RevisionCounterFile)
	if r.rc, _, err = openImage(rcPath, flag, r.mode == CounterPerWrite && !r.opts.BufferedIO); err != nil {
		return 0, err
	}
	r.pwBuf = alignedBuf(counterFileSize)
	formatRevisionCounter(r.pwBuf, int64(start))
	if _, err := r.rc.WriteAt(r.pwBuf, 0); err != nil {
		return 0, err
	}
	r.rcSeq.Store(start)
	if n, err := ParseRevisionCounter(rc); err == nil && cs.haveHdr {
		h.writeSeq = max(h.writeSeq, uint64(n))
	}
	return start, nil
}

// openHeader opens replica.hdr and records h there, unclean, with this
// boot and head: the header of a replica open for writing. slot is the
// slot h was read from (haveHdr); start is the count the counters opened
// at.
//
// Without a header of this replica's (a Longhorn directory, or a leftover
// header), the new one is written whole to a temporary file, synced and
// renamed over replica.hdr (writeFileAtomic) before it is opened: a kill
// leaves the old file or the new one, never an empty or zeroed header
// that no Open accepts, and no slot of a leftover can win.
func (r *Replica) openHeader(h header, slot int, haveHdr bool, start uint64) error {
	old := h
	// The persisted count stays what the last flush made durable: the live
	// count may include writes still in the device's cache.
	if !haveHdr {
		h.writeSeq = start
	}
	r.durable.Store(h.writeSeq)
	h.clean, h.bootID, h.head, h.rcSeq = false, r.bootID, r.head, r.rcSeq.Load()
	if err := r.injected(target.OpSidecarWrite, HeaderFile); err != nil {
		return err
	}
	if !haveHdr {
		h.gen = 1
		b := make([]byte, headerFileSize)
		h.encode(b[:headerSlotSize])
		if err := writeFileAtomic(r.dir, HeaderFile, b); err != nil {
			return err
		}
	}
	hf, direct, err := openImage(filepath.Join(r.dir, HeaderFile), os.O_RDWR|oDSync, !r.opts.BufferedIO)
	if err != nil {
		return err
	}
	r.hf = headerFile{f: hf, dsync: direct, buf: alignedBuf(headerSlotSize)}
	if !haveHdr {
		r.hf.slot, r.hf.cur = 0, h
		if r.live == nil {
			// Counter off: a leftover's page, now that the header no
			// longer names its replica, is just stale.
			if err := os.Remove(filepath.Join(r.dir, LiveCounterFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	}
	r.hf.slot, r.hf.cur = slot, old
	return r.hf.write(h)
}

// openLayers opens the chain's images (the head read-write, the
// snapshots read-only) and the backing file, and reads the disk tree.
func (r *Replica) openLayers(chain []string, vm VolumeMeta) error {
	for i, img := range chain {
		flag := os.O_RDONLY
		if i == 0 {
			flag = os.O_RDWR
		}
		f, direct, err := openImage(filepath.Join(r.dir, img), flag, !r.opts.BufferedIO)
		if err != nil {
			return err
		}
		r.layers = append(r.layers, f)
		if i == 0 {
			r.direct = direct
		}
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		// Longhorn's Expand (replica.go Expand, createDisk with the new
		// size) leaves the layers below the new head at the old size,
		// and its read path (diff_disk.go read) reads their missing
		// tail as zeros; so does ours (SEEK_DATA past a layer's end
		// finds nothing there). Only the head must have the volume size.
		if fi.Size() != vm.Size && (i == 0 || fi.Size() > vm.Size) {
			return corruptf(f.Name(), "size %d, volume size %d", fi.Size(), vm.Size)
		}
	}
	var err error
	if r.children, r.removed, err = diskTree(r.dir); err != nil {
		return err
	}
	bf, err := openBacking(r.dir, vm)
	if err != nil {
		return err
	}
	if bf != nil {
		r.layers = append(r.layers, bf)
		r.backing = true
	}
	return nil
}

// LockDir takes an exclusive flock on dir (internal/dirlock), failing with
// ErrBusy if another open file description holds it.
func LockDir(dir string) (*os.File, error) {
	d, err := dirlock.Lock(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s: %w: %w", dir, ErrNotReplica, err)
	case errors.Is(err, dirlock.ErrLocked):
		return nil, fmt.Errorf("%s: %w", dir, ErrBusy)
	}
	return d, err
}

// Close flushes, records a clean shutdown (replica.hdr, revision.counter,
// volume.meta Dirty=false) and closes the files. After a latched failure it
// only closes the files and returns the latched error.
func (r *Replica) Close() error {
	r.gate.Lock()
	defer r.gate.Unlock()
	if r.closed {
		return fmt.Errorf("%s: %w", r.dir, ErrClosed)
	}
	r.closed = true
	err := r.Err()
	if err == nil {
		err = r.sync(true)
		if err == nil {
			vm := r.vm
			vm.Dirty = false
			err = writeJSONAtomic(r.dir, VolumeMetaFile, vm)
		}
	}
	r.hwWG.Wait() // the header writer is done with replica.hdr
	if cerr := r.closeFiles(); err == nil {
		err = cerr
	}
	return err
}

func (r *Replica) closeFiles() error {
	var errs []error
	for _, f := range r.layers {
		errs = append(errs, f.Close())
	}
	r.layers = nil
	if r.live != nil {
		errs = append(errs, r.live.close())
	}
	if r.rc != nil {
		errs = append(errs, r.rc.Close())
	}
	if r.hf.f != nil {
		errs = append(errs, r.hf.f.Close())
	}
	if r.dirLock != nil {
		errs = append(errs, r.dirLock.Close()) // releases the flock
	}
	return errors.Join(errs...)
}
