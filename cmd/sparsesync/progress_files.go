package main

import (
	"os"
	"path/filepath"
	"syscall"
)

// The replica operations (export, rebuild, bench's fill) report no
// progress themselves; their bars watch the files they write instead:
// the bytes allocated to them, which is what the operation has written
// (holes stay unallocated), against what it will write.

// allocated is the bytes allocated to the regular file path (0 if gone).
func allocated(path string) int64 {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0
	}
	return st.Blocks * 512
}

// dirAllocated sums allocated() over the regular files directly in dir
// whose names keep(name) accepts (nil: all).
func dirAllocated(dir string, keep func(string) bool) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range entries {
		if keep == nil || keep(e.Name()) {
			n += allocated(filepath.Join(dir, e.Name()))
		}
	}
	return n
}

// newFilesIn returns a filter for dirAllocated that accepts only names that
// did not exist in dir when it was called: the files an operation creates.
func newFilesIn(dir string) func(string) bool {
	before := map[string]bool{}
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			before[e.Name()] = true
		}
	}
	return func(name string) bool { return !before[name] }
}

// fileSampler turns a done counter into a bar sample, capped at total.
func fileSampler(total int64, done func() int64) func() (int64, int64, int64) {
	return func() (int64, int64, int64) { return min(done(), total), total, 0 }
}
