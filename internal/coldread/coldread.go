package coldread

import "unsafe"

// Align is the offset, length and memory alignment of a direct read.
const Align = 4096

// MinDirect is the shortest read worth doing directly. Shorter ones go
// through the page cache, whose readahead merges neighbouring small
// extents into large disk reads that direct reads cannot match (an
// unchanged cold re-sync of 100,000 4 KiB extents: 3.3 s through the
// cache, 6.5 s direct).
const MinDirect = 256 << 10

// AlignedBuffer returns a buffer of n bytes whose first byte is
// Align-aligned in memory and whose capacity is n rounded up to Align, so
// that any read into it from offset 0 can go direct.
func AlignedBuffer(n int) []byte {
	c := (n + Align - 1) / Align * Align
	b := make([]byte, c+Align)
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % Align); r != 0 {
		b = b[Align-r:]
	}
	return b[:n:c]
}
