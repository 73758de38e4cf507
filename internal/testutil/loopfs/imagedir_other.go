//go:build !linux

package loopfs

import "testing"

// imageDir is where a loop filesystem's image goes: loop filesystems are
// Linux-only, so elsewhere this is never reached with an image to make.
func imageDir(t testing.TB, _ int64) string { return t.TempDir() }
