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
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/sparse"
)

// Options configure Create and Open. The zero value is valid: counter
// enabled (CounterOn), O_DIRECT where the filesystem allows it, the
// kernel's boot id, no logging.
type Options struct {
	// Counter is the revision counter mode of a new replica (Create). Open
	// uses the mode recorded in the directory and ignores this field.
	Counter CounterMode
	// BufferedIO opens images without O_DIRECT.
	BufferedIO bool
	// BootID overrides the kernel's boot id (tests simulate a reboot).
	BootID *ID
	// Logger receives debug events; nil discards them.
	Logger *slog.Logger

	// fault, when set, is called before every data write ("write"),
	// counter update ("counter") and sync ("sync") with the replica
	// directory; its error is treated as that operation failing (tests only).
	fault func(dir, op string) error
	// rebuilding opens a directory marked Rebuilding (a live rebuild's
	// write-only member).
	rebuilding bool
}

func (o *Options) bootID() (ID, error) {
	if o.BootID != nil {
		return *o.BootID, nil
	}
	return currentBootID()
}

// Replica is an open replica directory: the head image of a Longhorn-style
// snapshot chain, written in place.
//
// All methods are safe for concurrent use. Reads and writes run in
// parallel; a write with an unaligned edge read-modify-writes that 4 KiB
// block under a lock of that block only. Snapshot and Close wait for the I/O
// in flight and block new I/O while they run. The first failed write,
// unmap, counter update or sync latches: every later operation returns an
// error matching ErrLatched, so no write is acknowledged uncounted.
type Replica struct {
	dir    string
	opts   Options
	log    *slog.Logger
	mode   CounterMode
	size   int64
	bootID ID

	gate  sync.RWMutex // RLock: one I/O; Lock: snapshot, close
	locks blockLocks

	// Guarded by gate (read under RLock, changed under Lock).
	vm     VolumeMeta
	chain  []string   // image names, head first
	layers []*os.File // open images, head first
	direct bool       // layers[0] is O_DIRECT
	closed bool

	dirLock *os.File // flock(LOCK_EX) held while open

	live *liveCounter // nil when the counter is off
	rc   *os.File     // revision.counter; nil when off

	pwMu  sync.Mutex // per-write counter
	pwBuf []byte

	hmu sync.Mutex
	hf  headerFile

	// durable is the count of completed writes whose data a data sync has
	// made durable; replica.hdr never records more than this.
	durable atomic.Uint64

	// The header writer records durable in replica.hdr behind the flushes.
	hwMu      sync.Mutex
	hwRunning bool
	hwWG      sync.WaitGroup

	fmu      sync.Mutex // group commit
	fcond    *sync.Cond
	fstarted uint64
	fdone    uint64
	fsyncing bool

	latched atomic.Pointer[latchedError]
}

// Create makes a new replica of size bytes (a positive multiple of 4096) in
// dir, creating dir if needed, and opens it. volume.meta is written last, so
// an interrupted Create never leaves a directory that looks like a replica;
// a failed one removes what it created.
func Create(dir string, size int64, opts Options) (*Replica, error) {
	return create(dir, size, opts, newID())
}

func create(dir string, size int64, opts Options, volumeID ID) (_ *Replica, err error) {
	if size <= 0 || size%BlockSize != 0 {
		return nil, fmt.Errorf("replica: create %s: size %d is not a positive multiple of %d", dir, size, BlockSize)
	}
	mode := opts.Counter
	if mode > CounterPerWrite {
		return nil, fmt.Errorf("replica: create %s: unknown counter mode %d", dir, mode)
	}
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
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
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
	h := header{mode: mode, clean: true, volumeID: volumeID, replicaID: newID(), bootID: boot, gen: 1}
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
	return Open(dir, opts)
}

// Open opens the replica in dir for writing: ours, or one Longhorn wrote
// (whose counter mode is taken from the presence of revision.counter, since
// Longhorn does not record it; opening records it in replica.hdr).
func Open(dir string, opts Options) (_ *Replica, err error) {
	boot, err := opts.bootID()
	if err != nil {
		return nil, err
	}
	r := &Replica{dir: dir, opts: opts, log: opts.Logger, bootID: boot}
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
	if r.dirLock, err = lockDir(dir); err != nil {
		return nil, err
	}
	chain, vm, err := chainOf(dir, opts.rebuilding)
	if err != nil {
		return nil, err
	}
	if vm.Size%BlockSize != 0 {
		return nil, corruptf(filepath.Join(dir, VolumeMetaFile), "size %d is not a multiple of %d", vm.Size, BlockSize)
	}
	r.size, r.vm, r.chain = vm.Size, vm, chain

	hdrPath := filepath.Join(dir, HeaderFile)
	h, slot, haveHdr, err := readHeaderSlot(hdrPath)
	if err != nil {
		return nil, err
	}
	rcPath := filepath.Join(dir, RevisionCounterFile)
	if !haveHdr {
		// A Longhorn directory: adopt it.
		h = header{volumeID: newID(), replicaID: newID(), clean: !vm.Dirty}
		if _, err := os.Stat(rcPath); err == nil {
			h.mode = CounterOn
		} else {
			h.mode = CounterOff
		}
	}
	r.mode = h.mode

	var start uint64
	if r.mode.Enabled() {
		n, err := readRevisionCounter(rcPath)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if haveHdr && h.writeSeq != 0 {
				return nil, fmt.Errorf("%s: %w: %s missing", dir, ErrCorrupt, RevisionCounterFile)
			}
		case err != nil:
			return nil, err
		}
		start = uint64(n)
		if haveHdr {
			start = h.writeSeq
			if ls, ok, err := readLive(filepath.Join(dir, LiveCounterFile)); err == nil && ok &&
				ls.bootID == boot && ls.replicaID == h.replicaID && ls.count > start {
				start = ls.count
			}
		}
		if r.live, err = openLive(filepath.Join(dir, LiveCounterFile), h.replicaID, boot, start); err != nil {
			return nil, err
		}
		flag := os.O_RDWR | os.O_CREATE
		if r.rc, _, err = openImage(rcPath, flag, r.mode == CounterPerWrite && !opts.BufferedIO); err != nil {
			return nil, err
		}
		r.pwBuf = alignedBuf(counterFileSize)
		formatRevisionCounter(r.pwBuf, int64(start))
		if _, err := r.rc.WriteAt(r.pwBuf, 0); err != nil {
			return nil, err
		}
	}

	hf, direct, err := openImage(hdrPath, os.O_RDWR|os.O_CREATE|oDSync, !opts.BufferedIO)
	if err != nil {
		return nil, err
	}
	if err := hf.Truncate(headerFileSize); err != nil {
		hf.Close()
		return nil, err
	}
	r.hf = headerFile{f: hf, dsync: direct, buf: alignedBuf(headerSlotSize)}
	if haveHdr {
		r.hf.slot, r.hf.cur = slot, h
	} else {
		r.hf.slot = 1 // first write goes to slot A
	}
	// The persisted count stays what the last flush made durable: the live
	// count may include writes still in the device's cache.
	if !haveHdr {
		h.writeSeq = start
	}
	r.durable.Store(h.writeSeq)
	h.clean, h.bootID = false, boot
	if err := r.hf.write(h); err != nil {
		return nil, err
	}

	for i, img := range chain {
		flag := os.O_RDONLY
		if i == 0 {
			flag = os.O_RDWR
		}
		f, direct, err := openImage(filepath.Join(dir, img), flag, !opts.BufferedIO)
		if err != nil {
			return nil, err
		}
		r.layers = append(r.layers, f)
		if i == 0 {
			r.direct = direct
		}
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if fi.Size() != vm.Size {
			return nil, corruptf(f.Name(), "size %d, volume size %d", fi.Size(), vm.Size)
		}
	}
	vm.Dirty = true
	if err := writeJSONAtomic(dir, VolumeMetaFile, vm); err != nil {
		return nil, err
	}
	r.vm = vm
	r.log.Debug("replica opened", "dir", dir, "mode", r.mode.String(), "revision", start, "chain", len(chain), "direct", r.direct)
	return r, nil
}

// lockDir takes an exclusive flock on dir, failing with ErrBusy if another
// open file description holds it.
func lockDir(dir string) (*os.File, error) {
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w: %w", dir, ErrNotReplica, err)
	}
	if err != nil {
		return nil, err
	}
	rc, err := d.SyscallConn()
	if err != nil {
		d.Close()
		return nil, err
	}
	var errno error
	if err := rc.Control(func(fd uintptr) {
		for {
			if errno = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB); errno != unix.EINTR {
				return
			}
		}
	}); err != nil {
		errno = err
	}
	if errno != nil {
		d.Close()
		if errno == unix.EWOULDBLOCK {
			return nil, fmt.Errorf("%s: %w", dir, ErrBusy)
		}
		return nil, &fs.PathError{Op: "flock", Path: dir, Err: errno}
	}
	return d, nil
}

// Dir returns the replica directory.
func (r *Replica) Dir() string { return r.dir }

// Size returns the volume size in bytes.
func (r *Replica) Size() int64 { return r.size }

// CounterMode returns the replica's revision counter mode.
func (r *Replica) CounterMode() CounterMode { return r.mode }

// fail latches err (the first one wins) and returns the latched error.
func (r *Replica) fail(err error) error {
	le := &latchedError{dir: r.dir, cause: err}
	if !r.latched.CompareAndSwap(nil, le) {
		le = r.latched.Load()
	}
	r.log.Debug("replica latched", "dir", r.dir, "err", err)
	return le
}

// Err returns the latched error, or nil.
func (r *Replica) Err() error {
	if le := r.latched.Load(); le != nil {
		return le
	}
	return nil
}

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
	bp := bouncePool.Get().(*[]byte)
	defer bouncePool.Put(bp)
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
		_, err := r.layers[layer].ReadAt(b, o)
		return err
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

func (r *Replica) injected(op string) error {
	if r.opts.fault == nil {
		return nil
	}
	return r.opts.fault(r.dir, op)
}

func (r *Replica) write(p []byte, off, end int64) error {
	if err := r.injected("write"); err != nil {
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
	bp := bouncePool.Get().(*[]byte)
	defer bouncePool.Put(bp)
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
	bp := bouncePool.Get().(*[]byte)
	defer bouncePool.Put(bp)
	for len(p) > 0 {
		n := copy(*bp, p)
		if _, err := r.layers[0].WriteAt((*bp)[:n], off); err != nil {
			return err
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// Unmap discards [off, off+n): the 4 KiB-aligned interior is punched out of
// the head, partial blocks at the edges are left as they are (as Longhorn
// does). While snapshots exist below the head, punching would expose their
// data, so Unmap then discards nothing; it still counts as a revision.
func (r *Replica) Unmap(off, n int64) error {
	if n < 0 || n > int64(int(^uint(0)>>1)) {
		return fmt.Errorf("%s: %w: unmap %d bytes", r.dir, ErrOutOfRange, n)
	}
	if err := r.begin(off, int(n)); err != nil {
		return err
	}
	defer r.gate.RUnlock()
	a0, a1 := roundUp(off), roundDown(off+n)
	var err error
	if a1 > a0 && len(r.layers) == 1 {
		first, last := a0/BlockSize, (a1-1)/BlockSize
		r.locks.lock(first, last, false)
		_, err = sparse.PunchHole(r.layers[0], a0, a1-a0)
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

// count records one completed write or unmap.
func (r *Replica) count() error {
	if r.mode == CounterOff {
		return nil
	}
	if err := r.injected("counter"); err != nil {
		return fmt.Errorf("revision counter: %w", err)
	}
	if r.mode == CounterOn {
		r.live.n.Add(1)
		return nil
	}
	r.pwMu.Lock()
	defer r.pwMu.Unlock()
	n := r.live.n.Load() + 1
	formatRevisionCounter(r.pwBuf, int64(n))
	if _, err := r.rc.WriteAt(r.pwBuf, 0); err != nil {
		return fmt.Errorf("revision counter: %w", err)
	}
	r.live.n.Store(n)
	return nil
}

// Revision returns the number of completed writes and unmaps (0 when the
// counter is off).
func (r *Replica) Revision() int64 {
	if r.live == nil {
		return 0
	}
	return int64(r.live.n.Load())
}

// Flush makes every write completed before the call durable: one fdatasync
// of the head, with the counter on or off. With the counter on, the header
// writer then records the count that sync covered in replica.hdr, behind
// the flush (see sync). Concurrent flushes share one sync (group commit): a
// caller waits for the first sync that starts after it arrived, and the one
// caller that finds no sync running leads it.
func (r *Replica) Flush() error {
	if le := r.latched.Load(); le != nil {
		return le
	}
	r.gate.RLock()
	defer r.gate.RUnlock()
	if r.closed {
		return fmt.Errorf("%s: %w", r.dir, ErrClosed)
	}
	r.fmu.Lock()
	target := r.fstarted + 1
	for r.fdone < target {
		if r.fsyncing {
			r.fcond.Wait()
			continue
		}
		r.fsyncing = true
		r.fstarted++
		seq := r.fstarted
		r.fmu.Unlock()
		err := r.sync(false)
		r.fmu.Lock()
		if err != nil {
			r.fail(err)
		}
		r.fsyncing = false
		r.fdone = seq
		r.fcond.Broadcast()
	}
	r.fmu.Unlock()
	return r.Err()
}

// headerInterval is the least time between two count-only header writes.
const headerInterval = 10 * time.Millisecond

// sync persists data and a count (clean: the final sync of Close).
//
// A flush is one fdatasync of the head, as with the counter off. The count
// it made durable is recorded in replica.hdr afterwards by the header
// writer, a goroutine that runs while the header trails and writes at most
// once per headerInterval, so a flush never waits for a second I/O. The
// header only ever records a count whose data a completed sync made
// durable (design note 8 (c): never ahead of the data after a power loss);
// it trails the live count by the flushes of the last interval, which
// after a reboot costs at most a needless rebuild of a healthy replica,
// never a wrong pick: every replica of the highest epoch holds every write
// acknowledged before the last acknowledged flush. Close has no writes in
// flight and records the exact count after its data sync.
func (r *Replica) sync(clean bool) error {
	var s uint64
	if r.live != nil {
		s = r.live.n.Load()
	}
	if err := r.injected("sync"); err != nil {
		return err
	}
	if err := fdatasync(r.layers[0]); err != nil {
		return err
	}
	r.durable.Store(s)
	if !clean {
		if r.live != nil {
			r.kickHeader()
		}
		return nil
	}
	r.hwWG.Wait()
	// revision.counter is for Longhorn's tools and rewritten on close;
	// replica.hdr is what our check trusts after a reboot. (Rewriting
	// revision.counter on every flush as well cost up to half the flush
	// rate on ext4: another inode in each journal commit.)
	if r.rc != nil {
		r.pwMu.Lock()
		formatRevisionCounter(r.pwBuf, int64(s))
		_, err := r.rc.WriteAt(r.pwBuf, 0)
		r.pwMu.Unlock()
		if err != nil {
			return fmt.Errorf("revision counter: %w", err)
		}
		if err := fdatasync(r.rc); err != nil {
			return err
		}
	}
	return r.writeCount(s, true)
}

// kickHeader starts the header writer unless it runs.
func (r *Replica) kickHeader() {
	r.hwMu.Lock()
	defer r.hwMu.Unlock()
	if r.hwRunning {
		return
	}
	r.hwRunning = true
	r.hwWG.Add(1)
	go r.headerWriter()
}

// headerWriter records the durable count until the header holds it. A
// failed write latches the replica.
func (r *Replica) headerWriter() {
	defer r.hwWG.Done()
	for {
		r.hwMu.Lock()
		d := r.durable.Load()
		if d == r.headerCount() || r.latched.Load() != nil {
			r.hwRunning = false
			r.hwMu.Unlock()
			return
		}
		r.hwMu.Unlock()
		err := r.injected("header")
		if err == nil {
			err = r.writeCount(d, false)
		}
		if err != nil {
			r.fail(fmt.Errorf("%s: %w", HeaderFile, err))
			continue // latched: the loop ends
		}
		time.Sleep(headerInterval)
	}
}

// headerCount is the count replica.hdr holds.
func (r *Replica) headerCount() uint64 {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return r.hf.cur.writeSeq
}

// writeCount durably records count (at most r.durable) in replica.hdr.
func (r *Replica) writeCount(count uint64, clean bool) error {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	h := r.hf.cur
	h.flushSeq++
	h.writeSeq, h.clean, h.bootID = count, clean, r.bootID
	return r.hf.write(h)
}

// Epoch returns the membership epoch recorded in replica.hdr.
func (r *Replica) Epoch() uint64 {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return r.hf.cur.epoch
}

// SetEpoch durably records a new membership epoch (the engine bumps it on
// every survivor before acknowledging a write some replica failed).
func (r *Replica) SetEpoch(epoch uint64) error {
	if le := r.latched.Load(); le != nil {
		return le
	}
	r.hmu.Lock()
	defer r.hmu.Unlock()
	h := r.hf.cur
	h.epoch = epoch
	if r.live != nil {
		h.writeSeq = max(h.writeSeq, r.durable.Load())
	}
	if err := r.hf.write(h); err != nil {
		return r.fail(err)
	}
	return nil
}

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

// Info describes a replica directory.
type Info struct {
	Dir  string `json:"dir"`
	Size int64  `json:"size"`
	Head string `json:"head"`
	// CounterEnabled is the recorded mode (for a Longhorn directory without
	// replica.hdr: whether revision.counter exists).
	CounterEnabled bool        `json:"revision_counter_enabled"`
	CounterMode    CounterMode `json:"-"`
	// Revision is the count of completed writes and unmaps; nil when the
	// counter is off.
	Revision           *int64   `json:"revision"`
	HeadModTimeNs      int64    `json:"head_mtime_ns"`
	HeadAllocatedBytes int64    `json:"head_allocated_bytes"`
	Chain              []string `json:"chain"`
	// Epoch is the membership epoch; HasHeader is false for a directory
	// Longhorn wrote (no replica.hdr).
	Epoch     uint64 `json:"epoch"`
	HasHeader bool   `json:"has_header"`
}

// Info returns the replica's current description.
func (r *Replica) Info() (Info, error) {
	r.gate.RLock()
	defer r.gate.RUnlock()
	if r.closed {
		return Info{}, fmt.Errorf("%s: %w", r.dir, ErrClosed)
	}
	st, err := sparse.Stat(r.layers[0])
	if err != nil {
		return Info{}, err
	}
	info := Info{
		Dir: r.dir, Size: r.size, Head: r.vm.Head, CounterEnabled: r.mode.Enabled(), CounterMode: r.mode,
		HeadModTimeNs: st.ModTime.UnixNano(), HeadAllocatedBytes: st.Allocated,
		Chain: append([]string(nil), r.chain...), Epoch: r.Epoch(), HasHeader: true,
	}
	if r.live != nil {
		n := int64(r.live.n.Load())
		info.Revision = &n
	}
	return info, nil
}
