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

func startWriteback(*os.File) {}

func allocatesEagerly(*os.File) bool { return false }

func preallocate(*os.File, int64, int64) {}
