//go:build !linux

package target

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
