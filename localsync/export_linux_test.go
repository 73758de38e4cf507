package localsync

import (
	"github.com/sparsesync/sparsesync/internal/kcopy"
	"github.com/sparsesync/sparsesync/internal/target"
)

// Pointers to the syscall hooks of the kernel-copy layer (internal/kcopy),
// for tests only (the os/export_linux_test.go pattern): a test swaps one,
// records or injects, and restores it in t.Cleanup.
var (
	IoctlFicloneHook      = kcopy.FicloneHook
	IoctlFicloneRangeHook = kcopy.FicloneRangeHook
	CopyFileRangeHook     = kcopy.CopyFileRangeHook
)

// SetFaults installs f (internal/target's fault injector) on the
// destination of copies made with o: for tests only.
func SetFaults(o *Options, f *target.Faults) { o.faults = f }
