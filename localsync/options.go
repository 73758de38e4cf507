package localsync

import (
	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/qos"

	"fmt"
	"log/slog"
	"time"
)

// DefaultBlockSize is the comparison granularity of an incremental re-sync.
const DefaultBlockSize = 4096

// Options configure a copy. The zero value is a valid configuration: try
// every method, in place, fdatasync at the end, 4 KiB comparison blocks.
type Options struct {
	// Method restricts the copy to one method; MethodAuto tries reflink,
	// copy_file_range and read/write in that order.
	Method Method
	// Reflink says whether blocks may (auto), must (always) or must not
	// (never) be shared with the source.
	Reflink ReflinkMode
	// Atomic writes a temporary file next to the destination (cloned from
	// the old destination where the filesystem can) and renames it over the
	// destination only once the copy is complete and synced.
	Atomic bool
	// NoSync skips the final fdatasync (fsync and directory fsync in atomic
	// mode).
	NoSync bool
	// DetectZeros turns all-zero blocks inside the source's data extents
	// into holes. It is switched on by itself when the source cannot say
	// where its holes are (a block device), and it forces read/write.
	DetectZeros bool
	// FullCompare skips the quick check: an existing destination is
	// compared even when it carries the mark of a verified sync of this
	// very source version and is unchanged since (see Stats.QuickCheck).
	FullCompare bool
	// Manifest keeps a manifest of the destination (Copy only, not
	// CopyFile): a sidecar DST.sparsesync (mode 0600) with a keyed digest
	// of each 64 KiB block a re-sync compared (or of the part of it that a
	// data extent covers), named by the
	// destination's quick-check mark. The next re-sync of a changed source
	// into the unchanged destination reads only the source where the
	// digests match (see Stats.ManifestBytes). A first copy records none
	// (its data never passes through memory), so the saving starts with
	// the second re-sync. Ignored with NoSync; with Atomic or FullCompare
	// a manifest is written but not used. Without Manifest, Copy removes
	// the sidecar an earlier copy left.
	Manifest bool
	// BlockSize is the unit of comparison and zero detection (a power of two
	// from 512 to 1 MiB); 0 means DefaultBlockSize.
	BlockSize int64
	// Progress, if set, is called after each piece of work with the bytes of
	// source data done so far and the total. It is called from several
	// goroutines and must be quick and safe for concurrent use.
	Progress func(done, total int64)
	// Budget bounds the bytes per second this copy reads from storage (the
	// source, and the destination where a re-sync compares) and writes to
	// it, each direction on its own (package qos). Its Limiters may be
	// shared with other syncs and changed while they run. Clones move no
	// bytes and are not charged. The zero Budget is unlimited.
	Budget qos.Budget
	// Logger receives debug records (method choices, fallbacks). nil
	// discards them.
	Logger *slog.Logger

	faults *target.Faults // tests only: fails chosen writes of the destination
}

// orZero is *o, or the zero Options (the defaults) for a nil o: Copy and
// CopyFile work on their own copy and never change the caller's.
func orZero(o *Options) Options {
	if o == nil {
		return Options{}
	}
	return *o
}

func (o *Options) setDefaults() {
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports contradictory options with ErrInvalidOptions.
func (o *Options) Validate() error {
	bs := o.BlockSize
	if bs != 0 && (bs < 512 || bs > 1<<20 || bs&(bs-1) != 0) {
		return fmt.Errorf("%w: block size %d is not a power of two from 512 to 1 MiB", ErrInvalidOptions, bs)
	}
	if o.Method > MethodReadWrite {
		return fmt.Errorf("%w: method %s", ErrInvalidOptions, o.Method)
	}
	if o.Reflink > ReflinkNever {
		return fmt.Errorf("%w: reflink mode %s", ErrInvalidOptions, o.Reflink)
	}
	if o.Method == MethodReflink && o.Reflink == ReflinkNever {
		return fmt.Errorf("%w: method reflink with reflink never", ErrInvalidOptions)
	}
	if o.Reflink == ReflinkAlways && (o.Method == MethodCopyRange || o.Method == MethodReadWrite) {
		return fmt.Errorf("%w: reflink always with method %s", ErrInvalidOptions, o.Method)
	}
	if o.DetectZeros && (o.Method == MethodReflink || o.Reflink == ReflinkAlways) {
		return fmt.Errorf("%w: zero detection needs to read the data, it cannot reflink", ErrInvalidOptions)
	}
	return nil
}

// Stats say what a copy did. Cloned + Copied + Unchanged + ZeroBytes equals
// DataBytes when the copy succeeds.
type Stats struct {
	// Size is the source's (and now the destination's) size.
	Size int64
	// DataBytes is the source's data: the bytes inside its data extents.
	DataBytes int64
	// ClonedBytes were shared with the source (FICLONE/FICLONERANGE).
	ClonedBytes int64
	// CopiedBytes were physically written (copy_file_range or pwrite).
	CopiedBytes int64
	// UnchangedBytes compared equal (or still shared the source's blocks)
	// and were not written.
	UnchangedBytes int64
	// PunchedBytes of destination data became holes (fallocate PUNCH_HOLE;
	// on a block device, zeroed by the kernel).
	PunchedBytes int64
	// ZeroedBytes had to become zeros but could not be punched, so zeros were
	// written (a filesystem or device without hole punching).
	ZeroedBytes int64
	// ZeroBytes are source data bytes found to be all zeros (DetectZeros)
	// and left as holes.
	ZeroBytes int64
	// ManifestBytes of the destination were not read: the keyed digests
	// of its manifest (Options.Manifest) matched the source's, so they
	// are part of UnchangedBytes without a read.
	ManifestBytes int64
	// DirectReadBytes were read with O_DIRECT, by a full read/write copy
	// or a re-sync, because no page of them was cached (part of the bytes compared or copied, not
	// an addition to them).
	DirectReadBytes int64
	// QuickCheck reports that the destination carried the mark of a
	// verified, durable sync of this very source version (package
	// internal/syncmark, the extended attribute user.sparsesync.synced) and
	// that neither file had changed since: the copy ended without reading
	// or writing data, and DataBytes (from the mark) are all unchanged.
	// Any change to either file, another source, or a destination without
	// user extended attributes means a full comparison instead.
	QuickCheck bool
	// Method is the method that moved the data; MethodAuto when nothing had
	// to move.
	Method Method
	// Elapsed is the wall time of the copy.
	Elapsed time.Duration
	// Throttled is the time the copy spent waiting on Options.Budget: the
	// waits of its workers, which run in parallel, averaged over them. Near
	// Elapsed, the budget set the pace; near 0, the storage did.
	Throttled time.Duration
}
