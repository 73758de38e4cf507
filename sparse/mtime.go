package sparse

import (
	"context"
	"os"
	"time"
)

// SettleMtime returns f's info once any later change of f's bytes must give
// it another mtime, so that the mtime can stand for the bytes (a quick-check
// mark records it). A file changed within the filesystem clock's current
// granule could be written again in the same granule and keep its mtime.
// Rather than wait for the clock to move on (up to a tick, 4 ms at 250 Hz,
// or a second on whole-second filesystems), SettleMtime sets such an mtime
// back by a nanosecond, which the filesystem rounds down to its own granule:
// the kernel never stamps a later change earlier than the mtime it gave
// last, so every later change moves it. The clock being set back between
// two changes is not covered, as with the wait. Where the mtime cannot be
// set (not the file's owner, a filesystem that refuses), it waits as
// NewSettledWalker does. Block devices have no such time.
//
// A write into f by another process between the change and this call is
// folded into the mtime returned, as it would be by the wait: SettleMtime
// is for files only the caller writes.
func SettleMtime(ctx context.Context, f *os.File) (FileInfo, error) {
	info, err := Stat(f)
	if err != nil || info.BlockDevice || !racy(info.ModTime, fsNow()) {
		return info, err
	}
	if setMtime(f, info.ModTime.Add(-time.Nanosecond)) == nil {
		back, err := Stat(f)
		if err != nil {
			return FileInfo{}, err
		}
		if back.ModTime.Before(info.ModTime) {
			return back, nil
		}
	}
	w, err := NewSettledWalker(ctx, f)
	if err != nil {
		return FileInfo{}, err
	}
	return w.Info(), nil
}
