package bench

import (
	"math"
	"testing"
	"time"
)

// TestWindowRatios: cumulative samples become bytes per whole second over
// the rate, interpolated between samples; the last partial second is not a
// window.
func TestWindowRatios(t *testing.T) {
	const rate = 100
	s := []ioSample{{0, 0}, {500 * time.Millisecond, 50}, {1500 * time.Millisecond, 150}, {2 * time.Second, 260}, {2700 * time.Millisecond, 300}}
	got := windowRatios(s, rate)
	want := []float64{1.0, 1.6} // 0-1 s: 100 bytes (interpolated), 1-2 s: 260-100
	if len(got) != len(want) {
		t.Fatalf("windows %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Errorf("window %d: %v, want %v", i, got[i], want[i])
		}
	}
	r := BwlimitRow{Windows: []float64{1.2, 0.9, 1.0, 1.0}}
	r.summarize()
	if r.Median != 1.0 || r.Max != 1.2 {
		t.Errorf("median %v, busiest %v; want 1.0 and 1.2", r.Median, r.Max)
	}
	if w := windowRatios(s[:1], rate); w != nil {
		t.Errorf("one sample gave windows %v", w)
	}
}
