package stats

import (
	"slices"
	"time"
)

// Number is what the helpers summarise: plain numbers and time.Duration.
type Number interface {
	~int | ~int64 | ~float64
}

// Median returns the median of v: the middle value for an odd count, the
// mean of the two middle values for an even count, and 0 for none. v is not
// modified.
func Median[T Number](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return s[n/2-1] + (s[n/2]-s[n/2-1])/2
}

// Summary is the median, minimum and maximum of N runs.
type Summary[T Number] struct {
	N      int `json:"n"`
	Median T   `json:"median"`
	Min    T   `json:"min"`
	Max    T   `json:"max"`
}

// Summarize returns v's summary (all zero for no runs).
func Summarize[T Number](v []T) Summary[T] {
	if len(v) == 0 {
		return Summary[T]{}
	}
	return Summary[T]{N: len(v), Median: Median(v), Min: slices.Min(v), Max: slices.Max(v)}
}

// Ratios returns a[i]/b[i] for each pair, skipping pairs whose b is 0. The
// slices must have the same length (the same runs); extra values are ignored.
func Ratios[T Number](a, b []T) []float64 {
	n := min(len(a), len(b))
	r := make([]float64, 0, n)
	for i := range n {
		if b[i] != 0 {
			r = append(r, float64(a[i])/float64(b[i]))
		}
	}
	return r
}

// PairedRatio is the median of the per-run ratios a[i]/b[i] (0 when there
// is no pair with a non-zero b).
func PairedRatio[T Number](a, b []T) float64 {
	return Median(Ratios(a, b))
}

// Seconds converts durations to seconds, for reports.
func Seconds(d []time.Duration) []float64 {
	s := make([]float64, len(d))
	for i, x := range d {
		s[i] = x.Seconds()
	}
	return s
}

// Pair measures a and b back to back for run number run: a first in even
// runs, b first in odd ones, so that neither always follows the other (and
// gets its warm cache or its share of a drifting load). It returns a's
// result, then b's, whatever the order they ran in.
func Pair[T any](run int, a, b func() T) (T, T) {
	var x, y T
	if run%2 == 0 {
		x = a()
		y = b()
	} else {
		y = b()
		x = a()
	}
	return x, y
}
