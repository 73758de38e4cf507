// Package replica reads and writes replica directories in Longhorn's
// format, with a revision counter that costs almost nothing, and decides
// after a crash which replicas of a volume hold every acknowledged write.
//
// # Directory
//
// A replica directory holds what Longhorn's engine writes and reads:
//
//	volume.meta                 JSON: Size, Head, Dirty, Parent, SectorSize, ...
//	volume-head-NNN.img(.meta)  the writable head, a sparse file of the volume size
//	volume-snap-NAME.img(.meta) read-only snapshots; .meta Parent links form the chain
//	revision.counter            4096 bytes: ASCII decimal count, NUL padded
//
// plus two files of ours that Longhorn ignores:
//
//	replica.hdr   two crc32c-checked 4 KiB slots: counter mode, epoch,
//	              flush sequence, count at the last flush, volume/replica/boot ids,
//	              the head image it was written with (inode, birth time) and
//	              the count last written into revision.counter
//	live.counter  one MAP_SHARED page: the count of completed writes and
//	              the count last written into revision.counter
//
// Metadata is replaced by writing a temporary file, fsyncing it, renaming it
// over the old one and fsyncing the directory.
//
// # Revision counter
//
// Longhorn rewrites revision.counter with an extra O_DIRECT write on every
// I/O and never syncs it. Here (CounterOn) a completed write is counted by
// an atomic add in the mapped live.counter page: no syscall, and the count
// survives a kill of the process because it lives in the page cache. Flush
// is one fdatasync of the head, as with the counter off; the count it made
// durable is recorded behind it:
//
//	S = live count
//	pwrite(revision.counter, S)  (buffered: what Longhorn reads after a kill)
//	fdatasync(head)
//	D = S; wake the header writer
//	header writer, while replica.hdr trails D, at most once per 10 ms:
//	    write replica.hdr {flushSeq+1, writeSeq = D} into the other slot
//	    (one O_DIRECT|O_DSYNC 4 KiB write)
//
// So the header never claims a write whose data a power loss could still
// take, and no flush waits for a second I/O. After a reboot the header's
// count may trail the last flush by one interval: that can demote a
// healthy replica (a needless rebuild), never pick one that lacks a write
// acknowledged before the last acknowledged flush, since every replica of
// the highest epoch holds all of those. Close syncs the data first and
// then records the exact count. A failed header write latches the replica.
//
// revision.counter gets the count on Open, at every flush (before the data
// sync, one buffered pwrite) and on Close (then synced, before the clean
// header): a directory Longhorn adopts after a kill of our writer claims
// every write the last completed flush covered.
//
// # Leftovers and foreign writes
//
// A header is believed only for the replica it was written for: the head
// image it names (inode and birth time; a snapshot's hard link keeps it in
// the chain) must still be in the chain, and the counter files must not
// contradict it (counter on but revision.counter missing, counter off but
// present, clean but ahead of revision.counter). Otherwise it is the
// leftover of an earlier replica in the directory (Longhorn's Delete keeps
// our files): Open, Inspect, Check and Rebuild read Longhorn's files alone
// and Info.IgnoredHeader says why. Version-1 headers (before the head's
// identity was recorded) get the consistency rules only. A header whose
// head is found by inode and birth time vouches for itself: if
// revision.counter is then missing, that is damage (ErrCorrupt), not a
// new replica.
//
// When our header is unclean and revision.counter is past the count we
// last wrote into it, another writer (Longhorn) wrote on top of a count
// revision.counter never held: Info.ForeignWrites is that excess, and
// Check cannot order the replica against a sibling whose count is at or
// above ours (ErrOrderUndecided). Open takes such a replica as the one
// holding every write and counts on from our count plus the excess.
//
// Concurrent flushes share one such sync (group commit). After a reboot
// (another boot id) the live page is not trusted and the count of the last
// flush is used. CounterPerWrite reproduces Longhorn's per-write counter
// write for comparison.
//
// # Start check
//
// Check reads one probe per directory and applies the rules of package
// replica/check, a pure function: Longhorn's rules exactly (counter mode
// match, highest counter, the 5 s mtime window and allocated-bytes
// salvage) plus ours: an
// epoch in replica.hdr that the engine (Volume) bumps on the survivors
// before acknowledging a write some replica failed, so a replica that
// missed acknowledged writes is found even with the counter off.
//
// # Reading a chain
//
// Chain lists a directory's live chain (head first) from the .meta Parent
// links; HeadName, SnapshotName and MetaName build the file names.
// ChainReader merges the chain into one read-only source (ReadAt, Size,
// Map of data extents) for export and rebuild: a 4 KiB block comes from
// the newest layer that has any of it allocated (SEEK_DATA/SEEK_HOLE per
// layer), as Longhorn's location map decides. A raw backing file named in
// volume.meta is the bottom layer; other backing formats (qcow2) fail with
// ErrBackingFormat. Layers older than an expansion are shorter than the
// volume: their missing tail reads as zeros.
//
// # Export and rebuild
//
// Export writes the merged chain into one sparse image; the data map comes
// from one SEEK_DATA/SEEK_HOLE walk per layer, so it costs what the data
// costs, never the volume size. ChainReader is also a tcpsync.Source: a
// replica directory can be pushed as one volume.
//
// Package replica/rebuild's Rebuild copies a replica directory the way
// Longhorn's sync agent does, but verified and crash-safe; this package
// holds the on-disk protocol it follows (Stage: demote, finish, publish,
// purge), which Open, Check and Export must recognise, and moves no image
// itself (it imports neither localsync nor tcpsync). Longhorn opens a directory whatever its
// Rebuilding flag says: every top-level *.meta is a disk, a missing
// volume.meta is re-created from the first name containing volume-head,
// and a missing chain image is created empty (longhorn-engine
// pkg/replica/replica.go construct, tryRecoverVolumeMetaFile,
// readMetadata, openLiveChain). So the copy is made in target/StagingDir,
// which Longhorn never reads, and published by renames:
//
//	read the source's volume.meta (the target is not touched before)
//	demote: move target's images and .meta into the staging directory,
//	    the head's .meta first (from here on nothing adopts the old
//	    copy), drop its counters, volume.meta last
//	remove staged files the source does not have
//	per image and .meta, oldest first, into the staging directory:
//	    localsync.Copy (reflink, copy_file_range, read/write; only what
//	    differs from the staged older copy), compare bytes, fdatasync
//	on a local failure: remove what the local attempt created, warn,
//	    tcpsync.Pull every file instead (hash compare, verified)
//	staged revision.counter, replica.hdr := source's count, mode,
//	    volume, epoch; staged volume.meta := source's
//	publish: rename counters, volume.meta, every image and .meta but
//	    the head's, the head image; fsync target
//	rename the head's .meta; fsync target             <- the commit
//	remove the staging directory
//	on failure: remove the staging directory and, unless committed,
//	    the top-level files (head .meta first, volume.meta last)
//
// The state at each instant, for Longhorn and for us (Open, Check, Export
// fail with ErrRebuilding while a staging directory exists and the head's
// .meta does not):
//
//	before demote          the older copy as it was (adoptable: it is whole)
//	demote, publish        no head .meta at the top level, so Longhorn's
//	                       Chain fails or it finds no disk; ErrRebuilding
//	after the commit       a complete replica (a leftover staging
//	                       directory is ignored and removed by the next
//	                       rebuild)
//
// A rebuild killed anywhere is completed by the next one, which moves what
// a half-done publish left at the top level back into the staging
// directory and reuses every staged file (over TCP their tcpsync resume
// records too).
//
// Every disk the source lists is copied (the snapshots of a branch a revert
// abandoned too), as Longhorn's rebuild does; over TCP the server's listing
// of the directory (tcpsync.List) finds them.
// A replica's count is the highest its files claim (revision.counter,
// which Longhorn keeps current, replica.hdr, live.counter), read by the
// rules of "Leftovers and foreign writes" (incarnation.go); over TCP the
// source's image identities are not known, so only the counter files'
// consistency tells a leftover header there.
//
// Volume.AddReplica does it under writes (replica/rebuild.AddReplica gives
// it the copy of the snapshot files): the target, in its staging
// directory, joins write-only, every member snapshots with no write in
// flight, the now immutable snapshots are copied, and with no write in
// flight the target takes the source's count and the epoch, is published
// as above and switches to RW.
//
// # Concurrency
//
// Replica and Volume are safe for concurrent use. 4 KiB-aligned I/O goes
// straight to the head (O_DIRECT where the filesystem allows it); an
// unaligned edge is a read-modify-write of its 4 KiB block under a lock
// striped by block number, never a replica-wide lock. The first error of a
// write, counter update or sync latches: every later operation fails.
package replica
