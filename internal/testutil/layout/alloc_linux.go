package layout

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Preallocate reserves [off, off+n) of the file at path as unwritten blocks
// (fallocate with KEEP_SIZE): SEEK_DATA calls them a hole, they read as
// zeros, and they take space. It fails the test unless they do.
func Preallocate(t testing.TB, path string, off, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := Allocated(t, path)
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n); err != nil {
		t.Fatalf("fallocate %s %d+%d: %v", path, off, n, err)
	}
	if got := Allocated(t, path); got < before+n {
		t.Fatalf("%s: preallocating %d bytes took only %d", path, n, got-before)
	}
}

// Allocated is the kernel's count of the bytes the file at path takes
// (st_blocks * 512).
func Allocated(t testing.TB, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}
