//go:build !linux

package syncmark

import (
	"errors"
	"io/fs"
	"os"
)

var errUnsupported = errors.ErrUnsupported

// Marks are stored on Linux only; elsewhere every sync compares.

func getxattr(f *os.File, _ string, _ int) ([]byte, error) {
	return nil, &fs.PathError{Op: "getxattr", Path: f.Name(), Err: errors.ErrUnsupported}
}

func setxattr(f *os.File, _ string, _ []byte) error {
	return &fs.PathError{Op: "setxattr", Path: f.Name(), Err: errors.ErrUnsupported}
}

func removexattr(*os.File, string) error { return nil }
