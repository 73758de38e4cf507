package coldread

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePages asks for transparent huge pages for b (MADV_HUGEPAGE), for
// the huge-page-aligned part of it; where THP is off this does nothing.
func hugePages(b []byte) {
	lo := (hugePage - int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))%hugePage)) % hugePage
	if hi := lo + (len(b)-lo)/hugePage*hugePage; hi > lo {
		_ = unix.Madvise(b[lo:hi], unix.MADV_HUGEPAGE)
	}
}
