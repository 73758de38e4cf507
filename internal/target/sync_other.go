//go:build !linux

package target

import "os"

// Fdatasync falls back to fsync where fdatasync does not exist.
func Fdatasync(f *os.File) error { return f.Sync() }

// startWriteback does nothing where sync_file_range does not exist (a fault
// rule still sees the call): the next sync writes everything.
func (t *File) startWriteback() { t.faults.fire(OpWriteback, t.path) }
