package sparse

import (
	"context"
	"os"
	"time"
)

// A file's version is its identity and times: device, inode, size, mtime
// and ctime. A sync takes it before it reads a source and compares it after
// its last read (SameVersion), so that a source written meanwhile fails the
// sync instead of giving a torn copy reported complete. The comparison only
// proves something if any write after the first look gives a new ctime:
// a write in the same clock tick as the change before could leave it as it
// was. NewSettledWalker therefore takes the version only once the
// filesystem's clock has moved past the file's last change. (Linux 6.13 and
// later give ext4, XFS, btrfs and tmpfs multigrain timestamps, which
// guarantee that by themselves; other filesystems and kernels need the
// wait.)

// maxSettleWait bounds NewSettledWalker's wait for the filesystem clock.
const maxSettleWait = 2 * time.Second

// NewSettledWalker returns a Walker of f whose Info is f's version taken
// once the filesystem clock is at least one timestamp granule past f's
// last change (at most a clock tick, or a second on filesystems with
// whole-second times, and never more than 2 s). Block devices have no
// such time and are not waited for.
func NewSettledWalker(ctx context.Context, f *os.File) (*Walker, error) {
	return newSettledWalker(ctx, f, fsNow)
}

func newSettledWalker(ctx context.Context, f *os.File, now func() time.Time) (*Walker, error) {
	deadline := time.Now().Add(maxSettleWait)
	for {
		w, err := NewWalker(f)
		if err != nil {
			return nil, err
		}
		info := w.Info()
		fs := now()
		if info.BlockDevice || !racy(info.ChangeTime, fs) || time.Now().After(deadline) {
			return w, nil
		}
		// Sleep until the clock's step that passes the change, not by a
		// runtime timer's millisecond: a copy made within a tick (a
		// whole-file clone) waits for this before its quick-check mark.
		wake := fsClockPast(info.ChangeTime.Add(granule(info.ChangeTime)), fs)
		if err := settleSleep(ctx, max(time.Until(wake)+settleMargin, settlePoll)); err != nil {
			return nil, err
		}
	}
}

const (
	// settleMargin is how long after its step the filesystem clock is
	// looked at again.
	settleMargin = 50 * time.Microsecond
	// settlePoll is the shortest sleep between two looks: the kernel
	// takes the step in a tick's interrupt, which can come late (0.4 ms
	// in a virtual machine under load).
	settlePoll = 200 * time.Microsecond
)

// settleSleep sleeps d, or until ctx is done (its cause is returned). All
// but its last millisecond is a runtime timer, which ctx can cut short;
// the rest is a precise sleep (the runtime's timers wake up to a
// millisecond late, a quarter of a 250 Hz tick).
func settleSleep(ctx context.Context, d time.Duration) error {
	end := time.Now().Add(d)
	if d > time.Millisecond {
		t := time.NewTimer(d - time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		}
	}
	if r := time.Until(end); r > 0 {
		preciseSleep(r)
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// granule is the timestamp granule of a filesystem that stamped c: 1 ns,
// or 1 s when c has no sub-second part (coarse filesystems).
func granule(c time.Time) time.Duration {
	if c.Nanosecond() == 0 {
		return time.Second
	}
	return time.Nanosecond
}

// racy reports whether a write at now could get the ctime c again: the
// filesystem's clock has not moved past c by one timestamp granule (1 ns,
// or 1 s when c has no sub-second part, as on coarse filesystems).
func racy(c, now time.Time) bool {
	return now.Before(c.Add(granule(c)))
}

// SameVersion reports whether two infos of a file name the same version:
// the same device, inode, size, mtime and ctime.
func SameVersion(a, b FileInfo) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size &&
		a.ModTime.Equal(b.ModTime) && a.ChangeTime.Equal(b.ChangeTime)
}
