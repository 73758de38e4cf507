//go:build !linux

package sparse

import (
	"errors"
	"os"
	"time"
)

// setMtime is not done here: SettleMtime waits for the clock instead.
func setMtime(*os.File, time.Time) error { return errors.ErrUnsupported }
