//go:build !linux

package replica

import "os"

// Elsewhere images are opened buffered (openImage reports direct=false, so
// replica.hdr writes are followed by an fdatasync) and O_SYNC stands in
// for O_DSYNC.
const (
	oDirect = 0
	oDSync  = os.O_SYNC
)
