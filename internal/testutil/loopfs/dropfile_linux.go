package loopfs

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// DropFile writes path's dirty pages and drops its cached ones
// (POSIX_FADV_DONTNEED), so that the next read of it is cold. On a loop
// filesystem (its device in direct I/O mode) nothing below the file caches
// it either.
func DropFile(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("fadvise %s: %v", path, err)
	}
}
