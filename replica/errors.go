package replica

import (
	"errors"
	"fmt"
)

// Errors of opening and checking replica directories.
var (
	// ErrNotReplica: the directory has no readable volume.meta or head.
	ErrNotReplica = errors.New("replica: not a replica directory")
	// ErrInvalidOptions: options that cannot be used (Options.Validate,
	// VolumeOptions.Validate).
	ErrInvalidOptions = errors.New("replica: invalid options")
	// ErrCorrupt: a metadata file (volume.meta, a .meta, revision.counter,
	// replica.hdr) cannot be parsed. Match with errors.Is; the error names the file.
	ErrCorrupt = errors.New("replica: corrupt metadata")
	// ErrExists: Create found an existing replica in the directory.
	ErrExists = errors.New("replica: directory already holds a replica")
	// ErrBusy: another Replica (in this or another process) has the
	// directory open for writing.
	ErrBusy = errors.New("replica: directory is open by another writer")
	// ErrRebuilding: volume.meta says Rebuilding, or a rebuild's staged
	// copy (StagingDir) is not published: the directory is being (or was,
	// when interrupted) rebuilt and is incomplete. Rebuild it again.
	ErrRebuilding = errors.New("replica: directory is being rebuilt (incomplete)")
	// ErrNoHealthyReplica: the start check left no replica RW.
	ErrNoHealthyReplica = errors.New("replica: no healthy replica")
	// ErrOrderUndecided: the start check cannot order the replicas: one
	// holds writes of another writer (Longhorn) on top of a count our
	// writer left unclean, and a sibling's count is not below ours in it.
	ErrOrderUndecided = errors.New("replica: order of the replicas cannot be decided")
	// ErrBackingFormat: volume.meta names a backing file that is not a
	// raw image (qcow2 and the other formats qemu-img recognises): we
	// have no reader for it and refuse rather than read zeros.
	ErrBackingFormat = errors.New("replica: unsupported backing file format")
)

// Errors of rebuild.
var (
	// ErrVerify: a copied file does not read back as its source.
	ErrVerify = errors.New("replica: rebuild verification failed")
)

// Errors of the writer.
var (
	// ErrLatched wraps the first write, counter or sync error of a replica:
	// once it happened every later operation fails with it.
	ErrLatched = errors.New("replica: failed earlier, refusing further I/O")
	// ErrClosed: the replica or volume was closed.
	ErrClosed = errors.New("replica: closed")
	// ErrOutOfRange: an I/O beyond the volume size or at a negative offset.
	ErrOutOfRange = errors.New("replica: I/O out of range")
	// ErrBadName: an invalid snapshot name.
	ErrBadName = errors.New("replica: invalid snapshot name")
)

// latchedError carries the first failure of a replica; it matches both
// ErrLatched and the original cause.
type latchedError struct {
	dir   string
	cause error
}

func (e *latchedError) Error() string {
	return fmt.Sprintf("%s: %v: %v", e.dir, ErrLatched, e.cause)
}
func (e *latchedError) Unwrap() []error { return []error{ErrLatched, e.cause} }

// corruptf returns an ErrCorrupt naming the file.
func corruptf(path, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", path, ErrCorrupt, fmt.Sprintf(format, args...))
}
