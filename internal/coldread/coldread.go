package coldread

// Align is the offset, length and memory alignment of a direct read.
const Align = 4096

// MinDirect is the shortest read worth doing directly. Shorter ones go
// through the page cache, whose readahead merges neighbouring small
// extents into large disk reads that direct reads cannot match (an
// unchanged cold re-sync of 100,000 4 KiB extents: 3.3 s through the
// cache, 6.5 s direct).
const MinDirect = 256 << 10
