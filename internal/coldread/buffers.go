package coldread

import "unsafe"

// AlignedBuffer returns a buffer of n bytes whose first byte is
// Align-aligned in memory and whose capacity is n rounded up to Align, so
// that any read into it from offset 0 can go direct.
func AlignedBuffer(n int) []byte {
	c := (n + Align - 1) / Align * Align
	return aligned(c, Align)[:n:c]
}

// AlignedBuffers returns k buffers as AlignedBuffer's, of n bytes each,
// cut from one allocation aligned to a huge page, which is asked for
// transparent huge pages where the system has them (hugePages). A pool of
// read buffers is touched whole in a short sync; in 4 KiB pages its first
// touch is 256 page faults per MiB, which cost about 20 us each on a VM.
// The allocation is padded by up to 2 MiB to start on a huge page: address
// space, never touched but where the runtime zeroes reused memory. Without
// the pad, a push's eight buffers kept about 2 MiB in small pages (500 more
// faults); the time was within the noise (6 rounds).
func AlignedBuffers(k, n int) [][]byte {
	c := (n + Align - 1) / Align * Align
	slab := aligned(k*c, hugePage)
	hugePages(slab)
	out := make([][]byte, k)
	for i := range out {
		out[i] = slab[i*c : i*c+n : (i+1)*c]
	}
	return out
}

// hugePage is the size of a transparent huge page with 4 KiB base pages
// (amd64; arm64 with 4 KiB pages). Elsewhere the advice covers less.
const hugePage = 2 << 20

// aligned returns size bytes whose first byte is at a multiple of to in
// memory (a power of two), from an allocation of size+to.
func aligned(size, to int) []byte {
	b := make([]byte, size+to)
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % uintptr(to)); r != 0 {
		b = b[to-r:]
	}
	return b[:size:size]
}
