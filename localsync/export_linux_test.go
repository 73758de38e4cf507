package localsync

// Pointers to the syscall hooks, for tests only (the os/export_linux_test.go
// pattern): a test swaps one, records or injects, and restores it in
// t.Cleanup.
var (
	IoctlFicloneHook      = &ioctlFiclone
	IoctlFicloneRangeHook = &ioctlFicloneRange
	CopyFileRangeHook     = &copyFileRange
)
