//go:build !linux

package target

import (
	"io/fs"
	"os"
)

// OpenNoFollow opens name inside root (a path when root is nil). Elsewhere
// than Linux, Root mode relies on os.Root's own confinement
// (which may follow a symlink that stays inside the root).
func OpenNoFollow(root *os.Root, name string, flag int, perm fs.FileMode) (*os.File, error) {
	if root == nil {
		return os.OpenFile(name, flag, perm)
	}
	f, err := root.OpenFile(name, flag, perm)
	return f, RootErr(err)
}
