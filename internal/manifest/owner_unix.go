//go:build unix

package manifest

import (
	"io/fs"
	"os"
	"syscall"
)

// ownedByMe reports whether fi's owner is the effective user.
func ownedByMe(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
