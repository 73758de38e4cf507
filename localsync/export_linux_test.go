package localsync

import "github.com/sparsesync/sparsesync/internal/kcopy"

// Pointers to the syscall hooks of the kernel-copy layer (internal/kcopy),
// for tests only (the os/export_linux_test.go pattern): a test swaps one,
// records or injects, and restores it in t.Cleanup.
var (
	IoctlFicloneHook      = kcopy.FicloneHook
	IoctlFicloneRangeHook = kcopy.FicloneRangeHook
	CopyFileRangeHook     = kcopy.CopyFileRangeHook
)
