//go:build !linux

package localsync

import (
	"errors"
	"os"
)

func isUnsupported(err error) bool { return errors.Is(err, errors.ErrUnsupported) }

func cloneFile(_, _ *os.File) (bool, error) { return false, errors.ErrUnsupported }

func cloneRange(_, _ *os.File, _, _ int64) (int64, bool, error) {
	return 0, false, errors.ErrUnsupported
}

func copyRange(_, _ *os.File, _, _ int64) (int64, bool, error) {
	return 0, false, errors.ErrUnsupported
}

const oTmpfile = 0

func adviseSequential(*os.File) {}

func startWriteback(*os.File) {}
