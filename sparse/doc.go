// Package sparse knows where a file's data and holes are.
//
// It has two halves. The extent-map algebra (Extent, Map) describes
// "where the data is" as sorted, non-overlapping, coalesced ranges within a
// size, with set operations, block rounding and splitting, validation of maps
// that came from outside, and a compact binary encoding used on the wire.
// The file side (Walker, Fiemap, IsZero) finds those ranges in real files with
// SEEK_DATA/SEEK_HOLE, at a cost that grows with the number of extents and
// never with the size of the file.
//
// # Walking
//
// The walker never reads data. Its loop is:
//
//	pos := 0
//	while pos < size:
//	    d := lseek(pos, SEEK_DATA)   # ENXIO: no more data
//	    h := lseek(d, SEEK_HOLE)     # clamped to size
//	    if h <= d: h = d + 1 block   # range flipped under us: treat as data, keep moving
//	    yield [d, h)
//	    pos = h                      # strictly forward, so the walk always ends
//
// A filesystem that cannot answer SEEK_DATA (EINVAL, EOPNOTSUPP: block
// devices, procfs, some network filesystems) yields one data extent over the
// whole size and Walker.HolesKnown reports false, so callers can fall back to
// zero detection with IsZero.
//
// SEEK_DATA reports unwritten (preallocated) extents on ext4 and XFS as holes
// while they are uncached and as data once read; dirty, unflushed data is
// always data. Maps of the same file can therefore differ with page-cache
// state, never in a way that loses data.
package sparse
