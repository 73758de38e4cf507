package sparse

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestNextStep: the settled walker sleeps until the coarse clock's first
// step at or past the time it waits for, not a step early (it would look
// again for nothing) nor one late (a tick lost on every quick-check mark).
func TestNextStep(t *testing.T) {
	const tick = 4 * time.Millisecond
	fs := time.Unix(100, 2_000_000)
	for _, c := range []struct {
		name string
		t    time.Time
		want time.Time
	}{
		{"within this tick", fs.Add(time.Nanosecond), fs.Add(tick)},
		{"at the next step", fs.Add(tick), fs.Add(tick)},
		{"just past the next step", fs.Add(tick + time.Nanosecond), fs.Add(2 * tick)},
		{"three steps on", fs.Add(3 * tick), fs.Add(3 * tick)},
		{"a whole-second granule", time.Unix(101, 0), fs.Add(250 * tick)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := nextStep(c.t, fs, tick); !got.Equal(c.want) {
				t.Errorf("nextStep(fs%+v, fs, %v) = fs%+v, want fs%+v", c.t.Sub(fs), tick, got.Sub(fs), c.want.Sub(fs))
			}
		})
	}
}

// TestSettledWalkerOnTheRealClock: a file changed just now is looked at
// once the kernel's filesystem clock has passed its change, so that any
// later write gets another ctime.
func TestSettledWalkerOnTheRealClock(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 20 {
		if _, err := f.WriteString("data"); err != nil {
			t.Fatal(err)
		}
		w, err := NewSettledWalker(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		if c, now := w.Info().ChangeTime, fsNow(); racy(c, now) {
			t.Fatalf("settled at filesystem time %v, not past the change at %v", now, c)
		}
	}
}
