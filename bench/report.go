package bench

import (
	"encoding/json"
	"io"
	"time"

	"github.com/sparsesync/sparsesync/bench/stats"
)

// ReportVersion is the version of the JSON document.
const ReportVersion = 1

// Report is the result of a benchmark session: one JSON document.
type Report struct {
	Version  int       `json:"version"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Host     Host      `json:"host"`
	// Runs is the number of rounds of every case.
	Runs  int    `json:"runs"`
	Cases []Case `json:"cases"`
}

// Host says where the figures come from.
type Host struct {
	Hostname string `json:"hostname"`
	Kernel   string `json:"kernel"`
	CPUs     int    `json:"cpus"`
	MemBytes int64  `json:"mem_bytes"`
	Go       string `json:"go"`
	// Load1Start and Load1End are the 1-minute load averages at the start
	// and the end: a loaded machine gives noisy figures.
	Load1Start float64 `json:"load1_start"`
	Load1End   float64 `json:"load1_end"`
	// DropCaches is true when the workload was made cold before each run.
	DropCaches bool `json:"drop_caches"`
	// Evict says how: "files" (the scratch directory's files evicted from
	// the page cache, binaries stay cached), "all" (the whole cache
	// dropped) or "none".
	Evict string `json:"evict,omitempty"`
	// PeakRSS says how peak RSS was measured (or why not).
	PeakRSS string `json:"peak_rss_method"`
}

// Case is one workload, scenario and place, with every tool's runs.
type Case struct {
	Workload string `json:"workload"`
	// Scenario is "copy" (to a new file) or a change script's name (a
	// re-sync of the old version after that change).
	Scenario string `json:"scenario"`
	// Place names the filesystem ("ext4", "xfs", "tmpfs", or the --dir).
	Place string `json:"place"`
	// FSType is the filesystem type of the place as the kernel names it.
	FSType string `json:"fs_type"`
	Dir    string `json:"dir"`
	// Size, DataBytes and ChangedBytes describe the source: its size, the
	// bytes in its data extents and, for a re-sync, the bytes the change
	// script wrote or punched.
	Size         int64 `json:"size"`
	DataBytes    int64 `json:"data_bytes"`
	ChangedBytes int64 `json:"changed_bytes,omitempty"`
	// DeviceStats says whether DeviceWritten figures are known (the
	// target is on a block device).
	DeviceStats bool `json:"device_stats"`
	// Steady: sparsesync re-synced a target its own previous re-sync had
	// left (Config.Steady); the peers, which keep no state, started from
	// a plain copy of the old version.
	Steady bool `json:"steady,omitempty"`
	// Floor is the physical floor, measured in the same rounds.
	Floor Tool `json:"floor"`
	// Tools lists sparsesync first, then every peer (measured or skipped).
	Tools []Tool `json:"tools"`
}

// Tool is one tool's runs of a case and their summary.
type Tool struct {
	Name string `json:"name"`
	// Command is how the tool was run (SRC and DST stand for the paths).
	Command string `json:"command,omitempty"`
	// Network is set for a daemon and client over 127.0.0.1.
	Network bool `json:"network,omitempty"`
	// Skipped says why the tool did not run; it is empty when it ran.
	Skipped string `json:"skipped,omitempty"`
	// Error is the error that stopped the tool's runs, if any.
	Error string `json:"error,omitempty"`
	// WrongResult, when set, says how the tool's target differed from the
	// source after the first round: its times are of a broken sync.
	WrongResult string   `json:"wrong_result,omitempty"`
	Runs        []Sample `json:"runs,omitempty"`
	// Summaries of the runs (seconds; bytes).
	Wall          stats.Summary[float64] `json:"wall_s"`
	User          stats.Summary[float64] `json:"user_s"`
	Sys           stats.Summary[float64] `json:"sys_s"`
	PeakRSS       stats.Summary[int64]   `json:"peak_rss_bytes"`
	DeviceWritten stats.Summary[int64]   `json:"device_written_bytes"`
	// BusyCPU summarises Sample.BusyCPU (the rounds that measured it).
	BusyCPU stats.Summary[float64] `json:"busy_cpu_s"`
	// WireBytes summarises the bytes on the wire of a network tool (both
	// directions, counted by a proxy between client and daemon).
	WireBytes stats.Summary[int64] `json:"wire_bytes"`
	// SparsesyncRatio is the median over rounds of sparsesync's wall time
	// divided by this tool's, from the same round: below 1, sparsesync was
	// faster. 0 for sparsesync itself, its network sync and the floor.
	SparsesyncRatio float64 `json:"sparsesync_ratio,omitempty"`
	// RatioBase names the sparsesync side of SparsesyncRatio when it is
	// not "sparsesync" (the local copy): a network peer is compared with
	// sparsesync's network sync (SparsesyncNet).
	RatioBase string `json:"ratio_base,omitempty"`
	// BusyCPURatio is as SparsesyncRatio for Sample.BusyCPU: the median
	// over rounds of sparsesync's busy CPU seconds over this tool's.
	BusyCPURatio float64 `json:"busy_cpu_ratio,omitempty"`
	// FloorRatio is the median over rounds of this tool's wall time
	// divided by the floor's of the same round: 1 is as fast as the
	// hardware allows.
	FloorRatio float64 `json:"floor_ratio,omitempty"`
	// Profile summarises sparsesync's CPU profiles (with --profile).
	Profile *ProfileSummary `json:"profile,omitempty"`
}

// Measured reports whether the tool has runs.
func (t Tool) Measured() bool { return len(t.Runs) > 0 }

// Sample is one run of one tool.
type Sample struct {
	// Round is the round (0-based); Order is the position in the round.
	Round int     `json:"round"`
	Order int     `json:"order"`
	Wall  float64 `json:"wall_s"`
	User  float64 `json:"user_s"`
	Sys   float64 `json:"sys_s"`
	// PeakRSS is the child's maximum resident set size (0 for the floor,
	// measured in the benchmark process).
	PeakRSS int64 `json:"peak_rss_bytes"`
	// BusyCPU is the CPU seconds the whole machine spent during the run
	// (user, nice, system, irq, softirq and steal of every CPU in
	// /proc/stat, from the start to the end of the run's sync; -1 when
	// unknown). Unlike User and Sys it counts the kernel's flusher threads
	// writing back what a tool left dirty for the syncfs after it (cp's
	// case), which a tool that syncs its own target pays in its own
	// system time. On an idle machine it is the run's whole CPU cost.
	BusyCPU float64 `json:"busy_cpu_s"`
	// DeviceWritten is what the target's block device wrote during the
	// run, including the final sync (-1 when unknown).
	DeviceWritten int64 `json:"device_written_bytes"`
	// DeviceRead is what the block device of the run's directory read
	// during the run (-1 when unknown): with the workload evicted, the
	// tool's reads of the source and the old target that reached storage.
	DeviceRead int64 `json:"device_read_bytes"`
	// WireBytes are the bytes on the network, for tools that use one
	// (-1 when not measured or not applicable).
	WireBytes int64 `json:"wire_bytes"`
	// FloorMethod is, for the floor, the way that was fastest in this
	// round: "direct" (O_DIRECT), "buffered" (through the page cache) or
	// "direct-read" (reads with O_DIRECT, writes through the cache).
	FloorMethod string `json:"floor_method,omitempty"`
}

// summarize fills the tool's summaries from its runs.
func (t *Tool) summarize() {
	var wall, user, sys, busy []float64
	var rss, dev, wire []int64
	for _, r := range t.Runs {
		if r.BusyCPU >= 0 {
			busy = append(busy, r.BusyCPU)
		}
		if r.WireBytes >= 0 {
			wire = append(wire, r.WireBytes)
		}
		wall, user, sys = append(wall, r.Wall), append(user, r.User), append(sys, r.Sys)
		rss = append(rss, r.PeakRSS)
		if r.DeviceWritten >= 0 {
			dev = append(dev, r.DeviceWritten)
		}
	}
	t.Wall, t.User, t.Sys = stats.Summarize(wall), stats.Summarize(user), stats.Summarize(sys)
	t.PeakRSS, t.DeviceWritten = stats.Summarize(rss), stats.Summarize(dev)
	t.WireBytes = stats.Summarize(wire)
	t.BusyCPU = stats.Summarize(busy)
}

// paired returns what of a and b measure picks from the rounds both ran
// (measure's second result false: not measured in that run).
func paired(a, b []Sample, measure func(Sample) (float64, bool)) (x, y []float64) {
	byRound := make(map[int]float64, len(b))
	for _, r := range b {
		if v, ok := measure(r); ok {
			byRound[r.Round] = v
		}
	}
	for _, r := range a {
		v, ok := measure(r)
		if w, both := byRound[r.Round]; ok && both {
			x, y = append(x, v), append(y, w)
		}
	}
	return x, y
}

// PairedRatio is the median over the rounds both ran of a's wall time over
// b's (0 when they share no round).
func PairedRatio(a, b []Sample) float64 {
	return stats.PairedRatio(paired(a, b, func(s Sample) (float64, bool) { return s.Wall, true }))
}

// pairedBusyRatio is PairedRatio for the busy CPU seconds.
func pairedBusyRatio(a, b []Sample) float64 {
	return stats.PairedRatio(paired(a, b, func(s Sample) (float64, bool) { return s.BusyCPU, s.BusyCPU > 0 }))
}

// finish computes every tool's summaries and ratios.
func (c *Case) finish() {
	c.Floor.summarize()
	var net *Tool
	for i := range c.Tools {
		if c.Tools[i].Name == SparsesyncNet {
			net = &c.Tools[i]
		}
	}
	for i := range c.Tools {
		t := &c.Tools[i]
		t.summarize()
		if !t.Measured() {
			continue
		}
		t.FloorRatio = PairedRatio(t.Runs, c.Floor.Runs)
		switch {
		case i == 0 || t.Name == SparsesyncNet:
		case t.Network:
			t.RatioBase = SparsesyncNet
			if net != nil {
				t.SparsesyncRatio = PairedRatio(net.Runs, t.Runs)
				t.BusyCPURatio = pairedBusyRatio(net.Runs, t.Runs)
			}
		default:
			t.SparsesyncRatio = PairedRatio(c.Tools[0].Runs, t.Runs)
			t.BusyCPURatio = pairedBusyRatio(c.Tools[0].Runs, t.Runs)
		}
	}
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadJSON reads a report written by WriteJSON.
func ReadJSON(rd io.Reader) (*Report, error) {
	var r Report
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, err
	}
	return &r, nil
}

// coldNote says how the runs started cold, for the report's heading.
func coldNote(h Host) string {
	switch {
	case h.Evict == "files":
		return ", the workload's files evicted from the page cache before each run (binaries stay cached)"
	case h.Evict == "all" || h.Evict == "" && h.DropCaches:
		return ", the whole page cache dropped before each run"
	}
	return ", caches not dropped (not root, or asked not to)"
}
