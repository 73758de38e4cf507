package sparse

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRacy(t *testing.T) {
	fine := time.Unix(100, 5)
	coarse := time.Unix(100, 0)
	for _, c := range []struct {
		c, now time.Time
		want   bool
	}{
		{fine, fine, true},
		{fine, fine.Add(-time.Millisecond), true},
		{fine, fine.Add(time.Nanosecond), false},
		{coarse, coarse.Add(999 * time.Millisecond), true}, // whole-second times: the same second
		{coarse, coarse.Add(time.Second), false},
	} {
		if got := racy(c.c, c.now); got != c.want {
			t.Errorf("racy(%v, %v) = %v, want %v", c.c, c.now, got, c.want)
		}
	}
}

// TestSettledWalkerWaitsForTheClock: the version is taken only once the
// filesystem clock has moved past the file's last change; until then the
// file is looked at again.
func TestSettledWalkerWaitsForTheClock(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("data"); err != nil {
		t.Fatal(err)
	}
	info, err := Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	now := func() time.Time { // the clock stands at the change for 5 looks
		calls++
		if calls <= 5 {
			return info.ChangeTime
		}
		return info.ChangeTime.Add(time.Nanosecond)
	}
	w, err := newSettledWalker(t.Context(), f, now)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 6 {
		t.Errorf("the clock was read %d times, want 6 (5 in the change's tick, then past it)", calls)
	}
	if !SameVersion(w.Info(), info) {
		t.Errorf("settled version %+v, want %+v", w.Info(), info)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := newSettledWalker(ctx, f, func() time.Time { return info.ChangeTime }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while the clock stands: %v, want context.Canceled", err)
	}
}

func TestSameVersion(t *testing.T) {
	a := FileInfo{Dev: 1, Ino: 2, Size: 3, ModTime: time.Unix(4, 0), ChangeTime: time.Unix(5, 0)}
	if !SameVersion(a, a) {
		t.Error("a version differs from itself")
	}
	for _, b := range []FileInfo{
		{Dev: 9, Ino: 2, Size: 3, ModTime: a.ModTime, ChangeTime: a.ChangeTime},
		{Dev: 1, Ino: 9, Size: 3, ModTime: a.ModTime, ChangeTime: a.ChangeTime},
		{Dev: 1, Ino: 2, Size: 9, ModTime: a.ModTime, ChangeTime: a.ChangeTime},
		{Dev: 1, Ino: 2, Size: 3, ModTime: time.Unix(9, 0), ChangeTime: a.ChangeTime},
		{Dev: 1, Ino: 2, Size: 3, ModTime: a.ModTime, ChangeTime: time.Unix(9, 0)},
	} {
		if SameVersion(a, b) {
			t.Errorf("%+v and %+v called the same version", a, b)
		}
	}
}
