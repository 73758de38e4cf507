//go:build !linux

package sparse

import "time"

// fsNow is a conservative bound on the clock filesystems stamp ctime from:
// a second behind the wall clock.
func fsNow() time.Time { return time.Now().Add(-time.Second) }

// fsClockPast returns when (on the wall clock) the filesystem clock, which
// read fs just now, first reads t or later: fsNow is a second behind.
func fsClockPast(t, fs time.Time) time.Time { return t.Add(time.Second) }

// preciseSleep sleeps d.
func preciseSleep(d time.Duration) { time.Sleep(d) }
