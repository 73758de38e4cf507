//go:build !linux

package disks

import (
	"errors"
	"os"
)

func statfs(path string) (int64, int64, error) { return 0, 0, errors.ErrUnsupported }
func device(path string) (uint64, error)       { return 0, errors.ErrUnsupported }
func allocated(fi os.FileInfo) int64           { return fi.Size() }

type mount struct{ point, fsID, fsType, source string }

func mountOf(path string) (mount, error) { return mount{}, errors.ErrUnsupported }
