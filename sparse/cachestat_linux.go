package sparse

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// cachedPages counts the pages of [off, off+n) of f in the page cache
// (cachestat(2), Linux 6.5).
func cachedPages(f *os.File, off, n int64) (int64, error) {
	st, err := cachestat(f, off, n)
	return int64(st.Cache), err
}

// cachestat is cachestat(2) over [off, off+n) of f: its cached, dirty and
// writeback page counts.
func cachestat(f *os.File, off, n int64) (unix.Cachestat_t, error) {
	var st unix.Cachestat_t
	err := rawfd.Do(f, func(fd int) error {
		return unix.Cachestat(uint(fd), &unix.CachestatRange{Off: uint64(off), Len: uint64(n)}, &st, 0)
	})
	return st, err
}
