//go:build !linux

package sparse

import "os"

// PunchHole writes zeros over [off, off+n) on platforms without hole
// punching and reports punched=false.
func PunchHole(f *os.File, off, n int64) (punched bool, err error) {
	if n <= 0 {
		return true, nil
	}
	return false, WriteZeros(f, off, n)
}
