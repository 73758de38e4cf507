//go:build !linux

package localsync

import (
	"os"
)

const (
	oTmpfile      = 0
	preallocSmall = 0
)

func adviseSequential(*os.File) {}

func allocatesEagerly(*os.File) bool { return false }

var preallocate = func(*os.File, int64, int64) {}
