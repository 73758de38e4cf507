//go:build !linux

package target

import (
	"io/fs"
	"os"
)

// openNoFollow: elsewhere, Root mode relies on os.Root's own confinement
// (which may follow a symlink that stays inside the root).
func openNoFollow(root *os.Root, name string, flag int, perm fs.FileMode) (*os.File, error) {
	if root == nil {
		return os.OpenFile(name, flag, perm)
	}
	return root.OpenFile(name, flag, perm)
}
