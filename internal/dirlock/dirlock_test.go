//go:build unix

package dirlock

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

// TestLock: a second lock on the same directory fails with ErrLocked until
// the first is closed; a missing directory is fs.ErrNotExist.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	a, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v, want ErrLocked", err)
	}
	a.Close()
	b, err := Lock(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	b.Close()
	if _, err := Lock(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing dir: %v", err)
	}
}
