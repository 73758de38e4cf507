package bench

import (
	"slices"

	"github.com/sparsesync/sparsesync/internal/patternfile"
)

// ScenarioMultiSource is the scenario that measures a pull from several
// servers at once, each held to the same --bwlimit (RunMultiSource).
const ScenarioMultiSource = "multisource"

// MultiSourceConfig is a session of RunMultiSource.
type MultiSourceConfig struct {
	// Dir holds the servers' roots and the copies (required).
	Dir string
	// Size is the image's size (default 2 GiB); DataPercent its share of
	// data, in 1 MiB extents spread evenly (default 10).
	Size        int64
	DataPercent int
	// Rate is each server's --bwlimit, bytes per second (required).
	Rate int64
	// Sources are the numbers of servers to pull from (default 1, 2, 3).
	Sources []int
	// Rounds of interleaved runs, one per number of sources each (default 3).
	Rounds int
	// Serve returns the command of a server for root on 127.0.0.1 port 0
	// limited to rate that says its address on stderr ("serving ROOT on
	// ADDR") (required).
	Serve func(root string, rate int64) []string
	// Pull returns the command that pulls into dst from the sources
	// ADDR/REMOTE and prints pull's --json object (required).
	Pull func(dst string, from []string) []string
}

// MultiSourceRow is one pull.
type MultiSourceRow struct {
	Sources int `json:"sources"`
	// Round 0 is the first pull from every server: each computes its
	// manifest (one read of the image's data at its rate); the rounds
	// after it find the manifests cached.
	Round       int     `json:"round"`
	Seconds     float64 `json:"seconds"`
	WireBytes   int64   `json:"wire_bytes"`
	CopiedBytes int64   `json:"copied_bytes"`
	Error       string  `json:"error,omitempty"`
}

// MultiSourceSummary is the median of the rounds for one number of sources.
type MultiSourceSummary struct {
	Sources       int     `json:"sources"`
	Runs          int     `json:"runs"`
	MedianSeconds float64 `json:"median_seconds"`
	MedianWire    int64   `json:"median_wire_bytes"`
	// Rate is the image's data over the median time; Speedup the median
	// time of one source over this one's.
	Rate    float64 `json:"bytes_per_second"`
	Speedup float64 `json:"speedup"`
}

// SummarizeMultiSource takes the medians of the rows of rounds 1 and on.
func SummarizeMultiSource(rows []MultiSourceRow, data int64) []MultiSourceSummary {
	var out []MultiSourceSummary
	var base float64
	for _, n := range sortedSources(rows) {
		var secs []float64
		var wires []int64
		for _, r := range rows {
			if r.Sources == n && r.Round > 0 && r.Error == "" {
				secs = append(secs, r.Seconds)
				wires = append(wires, r.WireBytes)
			}
		}
		if len(secs) == 0 {
			continue
		}
		slices.Sort(secs)
		slices.Sort(wires)
		s := MultiSourceSummary{Sources: n, Runs: len(secs), MedianSeconds: secs[len(secs)/2], MedianWire: wires[len(wires)/2]}
		s.Rate = float64(data) / s.MedianSeconds
		if n == 1 {
			base = s.MedianSeconds
		}
		if base > 0 {
			s.Speedup = base / s.MedianSeconds
		}
		out = append(out, s)
	}
	return out
}

func sortedSources(rows []MultiSourceRow) []int {
	var ns []int
	for _, r := range rows {
		if !slices.Contains(ns, r.Sources) {
			ns = append(ns, r.Sources)
		}
	}
	slices.Sort(ns)
	return ns
}

// MultiSourceLayout is the image: size bytes with percent of them data, in
// 1 MiB extents spread evenly.
func MultiSourceLayout(size int64, percent int) patternfile.Layout {
	l := patternfile.Layout{Name: "multisource", Size: size}
	step := int64(100<<20) / int64(percent)
	for off := int64(0); off+1<<20 <= size; off += step {
		l.Data = append(l.Data, patternfile.Range{Off: off, Len: 1 << 20})
	}
	return l
}
