package bench

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// cachedPages is how many pages of path the page cache holds (cachestat).
func cachedPages(t *testing.T, path string) uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Cachestat_t
	if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &st, 0); err != nil {
		if errors.Is(err, unix.ENOSYS) {
			t.Skip("cachestat(2) needs Linux 6.5")
		}
		t.Fatal(err)
	}
	return st.Cache
}

// writeCached writes a 2 MiB file, makes it durable and reads it back, so
// that all its pages are cached and clean.
func writeCached(t *testing.T, path string) {
	t.Helper()
	b := make([]byte, 2<<20)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if n := cachedPages(t, path); n < 512 {
		t.Skipf("%s: only %d of 512 pages cached after reading it (memory pressure?)", path, n)
	}
}

// TestEvictFilesOnlyTheWorkload: a run starts with every file of its
// scratch directory (subdirectories too) out of the page cache, and a file
// elsewhere (a tool's binary) still cached.
func TestEvictFilesOnlyTheWorkload(t *testing.T) {
	base := t.TempDir()
	var fsst unix.Statfs_t
	if err := unix.Statfs(base, &fsst); err != nil {
		t.Fatal(err)
	}
	if fsst.Type == unix.TMPFS_MAGIC {
		t.Skip(base + " is on tmpfs, whose pages cannot be evicted")
	}
	dir := filepath.Join(base, "scratch")
	if err := os.MkdirAll(filepath.Join(dir, "serve-root"), 0o700); err != nil {
		t.Fatal(err)
	}
	inside := []string{filepath.Join(dir, "src"), filepath.Join(dir, "serve-root", "dst")}
	outside := filepath.Join(base, "binary")
	for _, p := range append(inside, outside) {
		writeCached(t, p)
	}
	if err := evictFiles(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range inside {
		if n := cachedPages(t, p); n != 0 {
			t.Errorf("%s: %d pages still cached after evictFiles", p, n)
		}
	}
	if n := cachedPages(t, outside); n < 512 {
		t.Errorf("%s (outside the scratch directory): %d of 512 pages left cached", outside, n)
	}
}
