package replica

import "golang.org/x/sys/unix"

// Open flags for images and replica.hdr: O_DIRECT bypasses the page cache
// (writes reach the device before they complete), O_DSYNC makes a
// completed write durable.
const (
	oDirect = unix.O_DIRECT
	oDSync  = unix.O_DSYNC
)
