// Package syncmark is the one home of "this destination is what a verified
// sync made of this source version": the name of a file's version (Version,
// which tcpsync's FileSource sends as its identity) and the mark a local sync
// leaves on its destination (Mark, in the extended attribute
// user.sparsesync.synced), so that a later sync of the same source version
// into the untouched destination ends without reading data (the quick
// check).
//
// # What a mark proves
//
// A mark names the source's version (device, inode, size, mtime, ctime) as
// the sync took it before its first read and found it after its last, and
// the destination as the sync left it, durable: device, inode, size and
// mtime. The destination's ctime cannot be part of it, because writing the
// mark changes it; its mtime can, because only a change of the file's bytes
// or size (write, truncate, fallocate, a clone into it) or an explicit
// utimensat moves it. Both versions only prove something if any later
// change gives a new time: the source's version is taken once the
// filesystem clock is past its last change (sparse.NewSettledWalker), and
// the destination's mtime, when the clock has not moved past it, is set back
// a nanosecond before the mark records it (sparse.SettleMtime), so that no
// later write can be stamped with it. Any change of either file, another source, another
// destination inode, or a mark that cannot be stored or read (no user
// extended attributes there) means no quick check: the sync compares.
//
// Not seen: a destination whose mtime is set back, to the nanosecond, with
// utimensat after a write (as rsync's own quick check, a deliberate act), and
// a clock set backwards between two syncs.
package syncmark
