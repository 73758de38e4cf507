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

// fsTick is the step of the filesystem clock: CLOCK_REALTIME_COARSE's
// resolution, one scheduler tick (4 ms at 250 Hz).
func fsTick() time.Duration {
	var ts unix.Timespec
	if unix.ClockGetres(unix.CLOCK_REALTIME_COARSE, &ts) != nil || ts.Nano() <= 0 {
		return time.Millisecond
	}
	return time.Duration(ts.Nano())
}

// fsClockPast returns when (on the wall clock) the filesystem clock, which
// read fs just now, first reads t or later.
func fsClockPast(t, fs time.Time) time.Time { return nextStep(t, fs, fsTick()) }

// nextStep returns the first step of a clock that moves in steps of tick,
// one of them at fs, that is t or later, and after fs: the coarse clock
// reads the time of its last step, so it reads t from that step on.
func nextStep(t, fs time.Time, tick time.Duration) time.Time {
	next := fs.Add(tick)
	if next.Before(t) {
		next = next.Add((t.Sub(next) + tick - 1) / tick * tick)
	}
	return next
}

// preciseSleep sleeps d with nanosleep, which wakes within microseconds.
func preciseSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for {
		// Interrupted (the runtime's preemption signal): ts is what is left.
		if err := unix.Nanosleep(&ts, &ts); err != unix.EINTR {
			return
		}
	}
}
