package bench

import "unsafe"

// align is the alignment O_DIRECT buffers get: the largest logical block
// size in use (4 KiB).
const align = 4096

// alignedBuf returns n bytes whose address is a multiple of align, as
// O_DIRECT reads and writes need.
func alignedBuf(n int) []byte {
	b := make([]byte, n+align)
	o := int(uintptr(unsafe.Pointer(&b[0])) & (align - 1))
	if o != 0 {
		o = align - o
	}
	return b[o : o+n : o+n]
}
