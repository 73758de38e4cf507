package coldread

import "golang.org/x/sys/unix"

// hugePages asks for transparent huge pages (MADV_HUGEPAGE) for the whole
// huge pages of b, which starts on one (aligned); where THP is off this
// does nothing.
func hugePages(b []byte) {
	if n := len(b) / hugePage * hugePage; n > 0 {
		_ = unix.Madvise(b[:n], unix.MADV_HUGEPAGE)
	}
}
