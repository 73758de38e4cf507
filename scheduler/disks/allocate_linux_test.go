package disks_test

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// allocate reserves size bytes of real blocks for f (fallocate(2)).
func allocate(_ testing.TB, f *os.File, size int64) error {
	return unix.Fallocate(int(f.Fd()), 0, 0, size)
}
