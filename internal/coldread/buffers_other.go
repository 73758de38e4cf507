//go:build !linux

package coldread

// hugePages does nothing here.
func hugePages([]byte) {}
