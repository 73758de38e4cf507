package replica

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/sparsesync/sparsesync/internal/target"
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
	// UnmapMarkSnapChainRemoved marks the snapshots behind the head
	// Removed on every unmap and discards the range in them too, as
	// Longhorn's setting of the same name does (see Unmap).
	UnmapMarkSnapChainRemoved bool

	// faults, tests only, fails chosen operations through internal/target's
	// seam: every data write (OpWrite on the head image), counter update
	// (OpSidecarWrite on revision.counter, CounterPerWrite's and
	// CounterOn's in-memory one alike), sync (OpFdatasync on the head
	// image) and replica.hdr write (OpSidecarWrite on replica.hdr, Open's
	// first one included). Names are paths in the replica directory.
	faults *target.Faults
	// rebuilding opens a directory marked Rebuilding (a live rebuild's
	// write-only member).
	rebuilding bool
}

// orZero is *o, or T's zero value (the defaults) for a nil o: a function
// taking *Options works on its own copy and never changes the caller's.
func orZero[T any](o *T) T {
	var v T
	if o != nil {
		v = *o
	}
	return v
}

// Validate reports options that cannot be used, with ErrInvalidOptions.
func (o *Options) Validate() error {
	if o.Counter > CounterPerWrite {
		return fmt.Errorf("%w: unknown counter mode %d", ErrInvalidOptions, o.Counter)
	}
	return nil
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

	gate sync.RWMutex // RLock: one I/O; Lock: snapshot, close
	// bounce holds aligned buffers of bounceSize for I/O whose buffer or
	// range cannot go to an O_DIRECT file as is (newBouncePool).
	bounce *sync.Pool
	locks  blockLocks

	// Guarded by gate (read under RLock, changed under Lock).
	vm     VolumeMeta
	chain  []string   // image names, head first
	layers []*os.File // open images, head first
	direct bool       // layers[0] is O_DIRECT
	// backing: the last of layers is the raw backing file (not in chain).
	backing bool

	metaMu   sync.Mutex      // Removed marks written by Unmap
	children map[string]int  // image -> number of child images
	removed  map[string]bool // image -> .meta Removed
	closed   bool

	dirLock *os.File // flock(LOCK_EX) held while open

	live *liveCounter // nil when the counter is off
	rc   *os.File     // revision.counter; nil when off

	pwMu  sync.Mutex // revision.counter writes
	pwBuf []byte
	// rcSeq is the count last written into revision.counter.
	rcSeq atomic.Uint64

	hmu  sync.Mutex
	hf   headerFile
	head fileIdent // the head image, recorded in every header write (under hmu)

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
	// IgnoredHeader says why a replica.hdr in the directory was ignored:
	// it was left by an earlier replica there (Longhorn's Delete keeps
	// it); the other fields then come from Longhorn's files alone.
	IgnoredHeader string `json:"ignored_header,omitempty"`
	// ForeignWrites > 0: our writer did not close, and another writer
	// (Longhorn) has counted at least this many writes in
	// revision.counter since, on top of Revision (our own count): the
	// replica holds Revision+ForeignWrites writes at least, and the start
	// check cannot order it against a sibling at or above Revision.
	ForeignWrites int64 `json:"foreign_writes,omitempty"`
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
