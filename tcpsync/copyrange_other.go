//go:build !linux

package tcpsync

import (
	"errors"
	"os"
)

// kernelCopy has no in-kernel copy here; the caller falls back to read/write.
func kernelCopy(_, _ *os.File, _, _ int64) (int, error) { return 0, errors.ErrUnsupported }
