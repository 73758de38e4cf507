package sparse

import (
	"time"

	"golang.org/x/sys/unix"
)

// fsNow is the clock filesystems stamp ctime from (CLOCK_REALTIME_COARSE,
// the kernel's current_time), so a ctime is never after it by a tick.
func fsNow() time.Time {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts) != nil {
		return time.Now().Add(-time.Second)
	}
	return time.Unix(ts.Unix())
}
