//go:build !linux

package sparse

import "time"

// fsNow is a conservative bound on the clock filesystems stamp ctime from:
// a second behind the wall clock.
func fsNow() time.Time { return time.Now().Add(-time.Second) }
