package stats

import (
	"math"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{7}, 7},
		{"odd unsorted", []float64{5, 1, 3}, 3},
		{"even mean of middles", []float64{4, 1, 3, 2}, 2.5},
		{"even with outlier", []float64{1, 2, 100, 3}, 2.5},
		{"repeated", []float64{2, 2, 2, 9, 9}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := append([]float64(nil), c.in...)
			if got := Median(c.in); got != c.want {
				t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
			}
			for i := range in {
				if in[i] != c.in[i] {
					t.Fatalf("Median reordered its input: %v", c.in)
				}
			}
		})
	}
}

func TestMedianDurationAndInt(t *testing.T) {
	if got := Median([]time.Duration{3 * time.Second, time.Second}); got != 2*time.Second {
		t.Errorf("duration median = %v, want 2s", got)
	}
	if got := Median([]int64{1, 4}); got != 2 { // integer mean rounds toward the lower middle
		t.Errorf("int64 median = %v, want 2", got)
	}
	if got := Median([]int64{math.MaxInt64 - 1, math.MaxInt64}); got != math.MaxInt64-1 {
		t.Errorf("median of two huge values overflowed: %v", got)
	}
}

func TestSummarize(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []float64
		want Summary[float64]
	}{
		{"none", nil, Summary[float64]{}},
		{"odd", []float64{3, 9, 1}, Summary[float64]{N: 3, Median: 3, Min: 1, Max: 9}},
		{"even", []float64{8, 2, 6, 4}, Summary[float64]{N: 4, Median: 5, Min: 2, Max: 8}},
		{"single", []float64{4}, Summary[float64]{N: 1, Median: 4, Min: 4, Max: 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Summarize(c.in); got != c.want {
				t.Errorf("Summarize(%v) = %+v, want %+v", c.in, got, c.want)
			}
		})
	}
}

func TestPairedRatio(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b []float64
		want float64
	}{
		{"odd", []float64{1, 4, 9}, []float64{2, 2, 3}, 2},          // ratios 0.5 2 3
		{"even", []float64{1, 2, 3, 8}, []float64{1, 1, 1, 1}, 2.5}, // ratios 1 2 3 8
		// The ratio of medians would be 3/3 = 1; per run, a is twice b in
		// two of three runs: the load drifted between runs, not within one.
		{"drift", []float64{2, 6, 20}, []float64{1, 3, 30}, 2},
		{"zero denominator skipped", []float64{1, 5, 6}, []float64{0, 5, 3}, 1.5},
		{"all zero", []float64{1}, []float64{0}, 0},
		{"unequal lengths use the common runs", []float64{2, 4, 100}, []float64{1, 1}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := PairedRatio(c.a, c.b); math.Abs(got-c.want) > 1e-12 {
				t.Errorf("PairedRatio(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
			}
		})
	}
}

func TestSeconds(t *testing.T) {
	got := Seconds([]time.Duration{1500 * time.Millisecond, 0})
	if len(got) != 2 || got[0] != 1.5 || got[1] != 0 {
		t.Errorf("Seconds = %v", got)
	}
}

func TestPair(t *testing.T) {
	for _, c := range []struct {
		run   int
		order string
	}{{0, "ab"}, {1, "ba"}, {2, "ab"}, {7, "ba"}} {
		var order string
		x, y := Pair(c.run, func() string { order += "a"; return "A" }, func() string { order += "b"; return "B" })
		if order != c.order || x != "A" || y != "B" {
			t.Errorf("run %d: ran %q, returned %q %q; want ran %q, returned A B", c.run, order, x, y, c.order)
		}
	}
}
