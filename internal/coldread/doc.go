// Package coldread reads the parts of a file that are not in the page cache
// with O_DIRECT, and the rest through the page cache: the cold-read path
// localsync (full copies and re-syncs) and tcpsync (hashing and sending a
// source) share.
//
// A cold read then costs the disk's time without copying every byte
// through the page cache and without evicting what other programs have
// cached. A range with any page cached, dirty or not, is read through the
// page cache as before, so warm data stays a memory copy and unwritten
// changes are always seen. Reads shorter than MinDirect stay buffered:
// the page cache's readahead merges neighbouring small reads into large
// disk reads that direct reads cannot match.
//
// The direct descriptor is opened for each direct read (through
// /proc/self/fd, checked to be the same inode), so a Reader owns nothing
// and needs no Close. Buffers must be aligned to Align in memory for a read
// to go direct (AlignedBuffer); any read that cannot go direct is an
// ordinary ReadAt.
package coldread
