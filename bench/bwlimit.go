package bench

import (
	"slices"
	"time"
)

// ScenarioBwlimit is the scenario that measures how well sparsesync keeps
// to --bwlimit (RunBwlimit), rather than racing peers.
const ScenarioBwlimit = "bwlimit"

// BwlimitConfig is a session of RunBwlimit.
type BwlimitConfig struct {
	// Places to run in (required).
	Places []Place
	// Rates to hold, bytes per second (default 10, 50 and 200 MiB/s).
	Rates []int64
	// Seconds is how long each run should last at its rate: the data is
	// sized for it (default 6).
	Seconds float64
	// Local returns sparsesync's command that copies or re-syncs src to
	// dst at rate bytes per second (required).
	Local func(src, dst string, rate int64) []string
	// Serve and Push, if set, measure a push too: a server for root on
	// 127.0.0.1 port 0 that says its address on stderr ("serving ROOT on
	// ADDR"), and a push of src to remote at addr at rate.
	Serve func(root string) []string
	Push  func(src, addr, remote string, rate int64) []string
	// KeepCaches skips dropping the caches before each run.
	KeepCaches bool
}

// BwlimitRow is one run: a mode (copy, resync, push) at one rate.
type BwlimitRow struct {
	Place string `json:"place"`
	Mode  string `json:"mode"`
	// What was measured, from the kernel's accounting of the sparsesync
	// process (/proc/PID/io): the bytes it caused to be written to storage
	// (copy), read from storage (resync: both files, caches dropped), or
	// wrote to its socket (push).
	Measure string  `json:"measure"`
	Rate    int64   `json:"rate"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	// Windows are the bytes of each whole second of the run over the rate.
	Windows []float64 `json:"windows"`
	Median  float64   `json:"median"`
	Max     float64   `json:"max"`
	// Skipped or Error say why a row has no figures.
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
}

// ioSample is a process's cumulative byte count at a time since its start.
type ioSample struct {
	at time.Duration
	n  int64
}

// windowRatios turns cumulative samples into the bytes of each whole
// second (interpolated between samples), over rate. The last, partial
// second is left out.
func windowRatios(samples []ioSample, rate int64) []float64 {
	if len(samples) < 2 || rate <= 0 {
		return nil
	}
	at := func(t time.Duration) float64 {
		i, _ := slices.BinarySearchFunc(samples, t, func(s ioSample, t time.Duration) int { return int(s.at - t) })
		switch {
		case i == 0:
			return float64(samples[0].n)
		case i >= len(samples):
			return float64(samples[len(samples)-1].n)
		}
		a, b := samples[i-1], samples[i]
		if b.at == a.at {
			return float64(b.n)
		}
		f := float64(t-a.at) / float64(b.at-a.at)
		return float64(a.n) + f*float64(b.n-a.n)
	}
	var out []float64
	for s := time.Second; s <= samples[len(samples)-1].at; s += time.Second {
		out = append(out, (at(s)-at(s-time.Second))/float64(rate))
	}
	return out
}

// summarize fills the row's median and busiest window.
func (r *BwlimitRow) summarize() {
	if len(r.Windows) == 0 {
		return
	}
	s := slices.Clone(r.Windows)
	slices.Sort(s)
	r.Median, r.Max = s[len(s)/2], s[len(s)-1]
}
