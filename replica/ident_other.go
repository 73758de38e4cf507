//go:build !linux

package replica

import (
	"fmt"
	"os"
	"syscall"
)

// identOf returns the inode number of the file at path; the birth time is
// left 0 (not read on this platform), so only the inode identifies it.
func identOf(path string) (fileIdent, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return fileIdent{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileIdent{}, fmt.Errorf("%s: no inode number on this platform", path)
	}
	return fileIdent{ino: uint64(st.Ino)}, nil
}
