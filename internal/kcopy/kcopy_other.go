//go:build !linux

package kcopy

import (
	"errors"
	"os"
)

// IsUnsupported reports errors that mean "this method cannot do it".
func IsUnsupported(err error) bool { return errors.Is(err, errors.ErrUnsupported) }

// CloneFile has no reflink here: never handled.
func CloneFile(_, _ *os.File, _ Inject) (bool, error) { return false, errors.ErrUnsupported }

// CloneRange has no reflink here: never handled.
func CloneRange(_, _ *os.File, _, _ int64, _ Inject) (bool, error) {
	return false, errors.ErrUnsupported
}

// CopyFileRange has no in-kernel copy here: never handled.
func CopyFileRange(_, _ *os.File, _, _ int64, _ Inject) (int64, bool, error) {
	return 0, false, errors.ErrUnsupported
}
