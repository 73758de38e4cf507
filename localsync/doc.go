// Package localsync copies a sparse file (or block device) to another one on
// the same machine exactly — every byte and every hole — by the cheapest
// path the filesystems offer, and re-syncs an existing copy by writing only
// the blocks that differ.
//
// # Full copy
//
// The destination is missing or empty:
//
//	walk the source's data extents (SEEK_DATA/SEEK_HOLE)
//	FICLONE the whole file                     # XFS, btrfs: milliseconds
//	else ftruncate(dst, size)                  # before any write: no XFS EOF preallocation
//	     for each data extent, on 8 workers:
//	         FICLONERANGE where block-aligned  # MethodReflink
//	         (ext4, pieces under 1 MiB: fallocated first, exactly, in
//	          file order, by the goroutine that hands out the work)
//	         else, ext4, a cold source, 256 KiB or more: O_DIRECT read + pwrite
//	         else copy_file_range, explicit offsets, this extent only
//	         (small extents closer than 64 KiB, where nothing clones:
//	          one read of their span, one pwrite per extent; batch.go)
//	         else pread/pwrite, pooled 1 MiB buffers
//	     every 8 MiB written: sync_file_range(WRITE) # the disk writes while
//	                                                # the source is still read
//
// The kernel calls are internal/kcopy's, shared with tcpsync. A method that
// fails with EXDEV, EINVAL, EOPNOTSUPP, ENOSYS, EPERM, EBADF, ETXTBSY or
// ENOTTY (copy_file_range: or EIO, as internal/poll), or whose first
// copy_file_range returns 0, is dropped for the rest of the copy — but only
// while it has written nothing; after that, such an error is
// ErrMethodFailed. ENOSPC, EDQUOT and any other errno always stop the copy
// (a real EIO shows again in the read/write fallback). Whether both files
// are on one filesystem is learnt from the errno, never from st_dev
// (overlayfs). Every kernel call into the destination goes through
// internal/target's File, so tests observe which method ran and inject
// errnos through its Faults (Faults.Calls, OpClone, OpCopyRange).
//
// # Incremental re-sync
//
// The destination exists: it is truncated or grown to the source's size and
// walked, then planned by internal/destplan (the rule tcpsync follows too,
// here at a compare unit of one byte). Both files are walked and planned a
// window of 4,096 extents at a time, the workers copying one window while
// the next is planned, so a copy's memory does not grow with the extent
// count (docs/scale.md):
//
//	dst data, src hole   -> punch (PUNCH_HOLE|KEEP_SIZE; zeros where impossible)
//	dst preallocated,    -> punch too: unwritten blocks SEEK_DATA calls holes
//	  src hole              still take space (sparse.HiddenAllocation: only
//	                        when st_blocks exceeds the walked data, then FIEMAP,
//	                        on tmpfs cachestat); not where the source has the
//	                        same preallocation (btrfs clones it with the file)
//	src data, dst hole   -> copy as above, without reading the destination
//	data on both sides   -> FIEMAP: ranges that still share the source's
//	                        physical blocks are equal unread (XFS, btrfs);
//	                        the rest is read on both sides at once and
//	                        compared per block byte for byte (both
//	                        blocks are in memory: no hash, so no
//	                        collision); differing blocks are cloned or
//	                        written
//
// so an unchanged re-sync writes nothing. Before any of it, the quick check:
// a destination that carries the mark of a verified, durable copy of this
// very source version (internal/syncmark, the extended attribute
// user.sparsesync.synced), and has kept the inode, size and mtime the mark
// recorded, is left alone without reading either file (Stats.QuickCheck;
// Options.FullCompare skips it). Whatever is read — a comparison,
// or the source of a full read/write copy — is read with O_DIRECT where no
// page of it is in the page cache (cachestat(2); internal/coldread, shared
// with tcpsync): a cold read then costs the disk's time only
// (Stats.DirectReadBytes); a cached or dirty range is read through the
// cache. A source range that FIEMAP shows unwritten or unmapped, with no
// dirty page and only zero pages cached, is a hole (XFS copy-on-write
// preallocations that SEEK_DATA reports as data while cached). Stats count cloned, copied,
// unchanged, punched and zeroed bytes exactly.
//
// # Safety
//
// The same file (device and inode, hence hard links) is refused before
// anything is written; the source is fstat'ed before and after and a change
// is ErrSourceChanged; Options.Atomic writes a temporary file and renames it;
// the destination is fdatasync'ed before success is reported unless
// Options.NoSync. A block-device destination must be at least the source's
// size and gets the source's holes zeroed by the kernel; a block-device
// source, which cannot say where its holes are, is scanned for zero blocks.
// The write side (internal/target) is shared with tcpsync.
package localsync
