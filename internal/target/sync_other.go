//go:build !linux

package target

import "os"

// Fdatasync falls back to fsync where fdatasync does not exist.
func Fdatasync(f *os.File) error { return f.Sync() }
