package target

// AllocateAheadBelow is the length of a source extent from which
// AllocateAhead leaves its blocks to the filesystem: a write of a megabyte
// or more is one large delayed allocation, which ext4 places well.
const AllocateAheadBelow = 1 << 20

const (
	allocYes = 1
	allocNo  = 2
)

// AllocateAhead allocates [off, off+n), a piece of a source extent of
// extent bytes (as the caller sees it: a window or a job may cut a large
// one) that the caller is about to write, where the filesystem
// places small delayed writes badly: on ext4, for an extent shorter than
// AllocateAheadBelow; elsewhere it does nothing. Callers allocate in file
// order, from one goroutine (ext4 then appends to its extent tree), and
// only what they are about to write: a sync that fails between the two
// leaves blocks that read as zeros, within the source's data.
//
// Why: ext4 allocates a delayed write at writeback and normalises each
// small request to a window of up to 8 MiB aligned at its offset
// (ext4_mb_normalize_request). In a file of small extents far apart each
// window reserves far more than it uses, the free space fragments, and
// later requests scan group after group for a window
// (ext4_mb_complex_scan_group). And allocating inside the writeback loop,
// extent by extent, it sent each extent's write as a request of its own:
// a push of 100,000 extents of 4 KiB made 100,000 write requests, against
// 2,400 with the blocks allocated ahead, in file order, whose writeback
// only maps them and merges the rest. fallocate asks for exactly the piece
// (EXT4_GET_BLOCKS_NO_NORMALIZE). XFS and btrfs allocate delayed writes
// well and would only pay for the unwritten extents; tmpfs would allocate
// twice; a block device has nothing to allocate.
//
// It is a hint: errors are ignored (the write that follows reports real
// trouble, ENOSPC), and a Faults rule for OpAllocate skips the call.
func (t *File) AllocateAhead(off, n, extent int64) {
	if n <= 0 || extent >= AllocateAheadBelow || t.device || !t.onExt4() {
		return
	}
	if _, ok := t.faults.fireRange(OpAllocate, t.path, off, n); ok {
		return
	}
	t.allocate(off, n)
}

// CopyRangeCopies reports whether copy_file_range into this file is the
// kernel's generic copy through the page cache, with no clone and no
// offload behind it: on ext4. There a cold source is copied faster by
// direct reads and plain writes (localsync, docs/local.md).
func (t *File) CopyRangeCopies() bool { return !t.device && t.onExt4() }

// onExt4 reports, once per File, whether its filesystem is ext4, where
// AllocateAhead pays and copy_file_range only copies (allocatesEagerly).
func (t *File) onExt4() bool {
	switch t.alloc.Load() {
	case allocYes:
		return true
	case allocNo:
		return false
	}
	v := int32(allocNo)
	if allocatesEagerly(t.f) {
		v = allocYes
	}
	t.alloc.Store(v)
	return v == allocYes
}
