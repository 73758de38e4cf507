package sparse

import (
	"os"

	"golang.org/x/sys/unix"
)

// cachedPages counts the pages of [off, off+n) of f in the page cache
// (cachestat(2), Linux 6.5).
func cachedPages(f *os.File, off, n int64) (int64, error) {
	var st unix.Cachestat_t
	err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{Off: uint64(off), Len: uint64(n)}, &st, 0)
	return int64(st.Cache), err
}
