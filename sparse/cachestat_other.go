//go:build !linux

package sparse

import (
	"errors"
	"os"
)

// cachedPages needs cachestat(2), which is Linux's.
func cachedPages(*os.File, int64, int64) (int64, error) { return 0, errors.ErrUnsupported }
