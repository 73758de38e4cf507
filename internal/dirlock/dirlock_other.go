//go:build !unix

package dirlock

import (
	"errors"
	"os"
)

// ErrLocked is returned when another open file description holds the lock.
var ErrLocked = errors.New("dirlock: directory is locked")

// Lock is not supported off Unix.
func Lock(dir string) (*os.File, error) { return nil, errors.ErrUnsupported }
