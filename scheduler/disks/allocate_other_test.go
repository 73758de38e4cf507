//go:build !linux

package disks_test

import (
	"os"
	"testing"
)

// allocate needs fallocate(2), which is Linux's; where it is missing the
// tests that fill a disk skip.
func allocate(t testing.TB, _ *os.File, _ int64) error {
	t.Skip("filling a disk needs fallocate(2), which is Linux's")
	return nil
}
