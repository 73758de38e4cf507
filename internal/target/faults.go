package target

import (
	"io"
	"path"
	"sync"
	"syscall"
	"time"
)

// Op is a kind of operation on a destination that Faults can fail.
type Op uint8

//go:generate go run golang.org/x/tools/cmd/stringer@v0.52.0 -type=Op -linecomment

// The operations a fault can be injected into. Each one's String is its
// line comment.
const (
	// OpWrite is WriteAt (pwrite).
	OpWrite Op = iota + 1 // write
	// OpPunch is Zero (fallocate PUNCH_HOLE, or writing zeros).
	OpPunch // punch
	// OpTruncate is SetSize (ftruncate).
	OpTruncate // truncate
	// OpFdatasync is Sync, and Commit/Publish in place.
	OpFdatasync // fdatasync
	// OpFsync is Commit/Publish of an atomic temporary file.
	OpFsync // fsync
	// OpRename is Commit/Publish: the rename over the destination.
	OpRename // rename
	// OpSidecarWrite is a caller's metadata file next to the destination
	// (File.Inject, Faults.Inject).
	OpSidecarWrite // sidecar write
	// OpClone is Clone (FICLONE: a whole-file reflink).
	OpClone // ficlone
	// OpCloneRange is CloneRange (FICLONERANGE), and clone probes
	// (File.Injector).
	OpCloneRange // ficlonerange
	// OpCopyRange is one copy_file_range call (CopyFileRange).
	OpCopyRange // copy_file_range
	// OpWriteback is a Writebacker's start of writeback (sync_file_range
	// SYNC_FILE_RANGE_WRITE). It is only a head start: an Err skips the
	// call and is not reported.
	OpWriteback // sync_file_range
	// OpAllocate is AllocateAhead (fallocate KEEP_SIZE before a small
	// write). It is only a placement hint: an Err skips the call and is
	// not reported. Faults.Ranges lists what each call asked for.
	OpAllocate // fallocate
)

// Fault is one rule of Faults: fail the N-th call of Op on a name that
// matches Path.
type Fault struct {
	Op Op
	// Path is a path.Match pattern matched against the destination's name
	// (as given to Create) and against its last element; "" matches all.
	Path string
	// N is which matching call fails, from 1; 0 fails every one.
	N int
	// Err is the error the call returns (wrapped as the real one would
	// be, so errors.Is finds it); nil means EIO, or for a short write
	// io.ErrShortWrite. For OpClone, OpCloneRange and OpCopyRange it is
	// the errno the system call returns instead of running, and the kernel
	// copy layer (internal/kcopy) sorts it as it would the real one: EXDEV
	// or EOPNOTSUPP mean "cannot, fall back", ENOSPC or EIO a failure
	// (EIO falls back from a first copy_file_range), EINTR is retried;
	// io.EOF makes copy_file_range copy 0 bytes.
	Err error
	// Short makes a failing OpWrite write its first Short bytes for real
	// before it returns Err: a short write. With OpCopyRange and no Err,
	// the call copies at most Short bytes for real and succeeds: a short
	// copy, which the caller must continue.
	Short int
	// Delay makes the matching call wait that long first: a slow disk.
	// With Delay and no Err the call then runs for real and succeeds.
	Delay time.Duration
	// When, if set, is asked on every call that matches Op and Path,
	// before the call is counted: the rule applies (counts toward N, and
	// may fire) only while it returns true. It runs outside the
	// injector's lock and may block: a test turns a fault on after its
	// setup phase (as pebble's errorfs.Toggle), or holds a call there.
	When func() bool
}

// Faults injects errors into the operations of the Files created with it
// (Options.Faults), in the spirit of pebble's errorfs: tests say which
// operation, on which name, at which call, fails how. A nil *Faults
// injects nothing. It is safe for concurrent use.
type Faults struct {
	mu    sync.Mutex
	rules []Fault
	calls []int // matching calls seen, per rule
	hits  int
	seen  map[Op]int // every call, per Op
	// ranges: the range of every call that names one (OpAllocate), per Op.
	ranges map[Op][]Range
}

// Range is the byte range of a call, as Faults.Ranges reports it.
type Range struct{ Off, Len int64 }

// NewFaults returns an injector with the given rules; the first rule that
// fires on a call decides it.
func NewFaults(rules ...Fault) *Faults {
	return &Faults{rules: rules, calls: make([]int, len(rules)), seen: map[Op]int{}, ranges: map[Op][]Range{}}
}

// Ranges reports the ranges the calls of op asked for so far, in call
// order (only OpAllocate names one): a test sees what was allocated ahead.
func (f *Faults) Ranges(op Op) []Range {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Range(nil), f.ranges[op]...)
}

// fireRange is fire for a call on the range [off, off+n), which it records.
func (f *Faults) fireRange(op Op, name string, off, n int64) (Fault, bool) {
	if f != nil {
		f.mu.Lock()
		f.ranges[op] = append(f.ranges[op], Range{off, n})
		f.mu.Unlock()
	}
	return f.fire(op, name)
}

// Calls reports how many calls of op the Files made so far, whether or
// not a rule fired: a test sees which method ran. NewFaults() with no
// rule only counts.
func (f *Faults) Calls(op Op) int {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[op]
}

// Hits reports how many calls a rule fired on so far (failed, or only
// slowed by a Delay).
func (f *Faults) Hits() int {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

// fire counts a call of op on name and returns the rule that fails it,
// after the rule's Delay; a rule with a Delay and no Err only slows it.
func (f *Faults) fire(op Op, name string) (Fault, bool) {
	r, ok := f.match(op, name)
	if !ok {
		return Fault{}, false
	}
	if r.Delay > 0 {
		time.Sleep(r.Delay)
		if r.Err == nil {
			return Fault{}, false
		}
	}
	if r.Err == nil {
		switch {
		case op == OpCopyRange && r.Short > 0:
			return r, true // a short copy, no error
		case op == OpWrite && r.Short > 0:
			r.Err = io.ErrShortWrite
		default:
			r.Err = syscall.EIO
		}
	}
	return r, true
}

// match counts a call of op on name and returns the rule it fires.
func (f *Faults) match(op Op, name string) (Fault, bool) {
	if f == nil {
		return Fault{}, false
	}
	// The rules never change: ask their When before taking the lock.
	var off []bool
	for i, r := range f.rules {
		if r.When != nil && r.Op == op && matches(r.Path, name) && !r.When() {
			if off == nil {
				off = make([]bool, len(f.rules))
			}
			off[i] = true
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen[op]++
	for i, r := range f.rules {
		if r.Op != op || !matches(r.Path, name) || (off != nil && off[i]) {
			continue
		}
		f.calls[i]++
		if r.N == 0 || r.N == f.calls[i] {
			f.hits++
			return r, true
		}
	}
	return Fault{}, false
}

func matches(pattern, name string) bool {
	if pattern == "" {
		return true
	}
	if ok, _ := path.Match(pattern, name); ok {
		return true
	}
	ok, _ := path.Match(pattern, path.Base(name))
	return ok
}

// Inject lets a caller that writes files of its own next to the
// destination (a sidecar) fail them through the same Faults: it returns
// the error of a rule for op on name, else nil.
func (t *File) Inject(op Op, name string) error {
	if t == nil {
		return nil
	}
	return t.faults.Inject(op, name)
}

// Inject is the seam for a writer whose files do not go through a File
// (the replica format's own images, counter and header): it counts a call
// of op on name and returns the error of the rule that fires (after its
// Delay), else nil. The caller treats the error as the operation failing.
func (f *Faults) Inject(op Op, name string) error {
	if r, ok := f.fire(op, name); ok {
		return r.Err
	}
	return nil
}

// SetFaults installs f on a File its caller made through a path other
// than Options (a server's own open sequence): for tests of such callers.
func (t *File) SetFaults(f *Faults) { t.faults = f }
