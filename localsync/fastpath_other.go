//go:build !linux

package localsync

import (
	"os"
)

const oTmpfile = 0

func adviseSequential(*os.File) {}
