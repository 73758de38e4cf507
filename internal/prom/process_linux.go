package prom

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processCollector is the process_* families of the Prometheus Go client's
// process collector, read from /proc/self and getrlimit at each scrape.
type processCollector struct{}

// NewProcessCollector returns the process families: CPU time, open and
// maximum file descriptors, virtual and resident memory, start time.
func NewProcessCollector() Collector { return processCollector{} }

// userHZ is the unit of /proc's clock-tick fields (USER_HZ, 100 on every
// Linux architecture Go supports).
const userHZ = 100

func (processCollector) families(out []family) []family {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
		out = append(out, counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", cpu))
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		out = append(out, gauge("process_open_fds", "Number of open file descriptors.", float64(len(fds))))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		out = append(out, gauge("process_max_fds", "Maximum number of open file descriptors.", float64(lim.Cur)))
	}
	if syscall.Getrlimit(syscall.RLIMIT_AS, &lim) == nil {
		out = append(out, gauge("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", float64(lim.Cur)))
	}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 2 {
			page := float64(os.Getpagesize())
			vsz, _ := strconv.ParseFloat(f[0], 64)
			rss, _ := strconv.ParseFloat(f[1], 64)
			out = append(out, gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", vsz*page),
				gauge("process_resident_memory_bytes", "Resident memory size in bytes.", rss*page))
		}
	}
	if start, ok := startTime(); ok {
		out = append(out, gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", start))
	}
	return out
}

// startTime is the process's start in seconds since the epoch: the boot
// time (btime in /proc/stat) plus starttime (field 22 of /proc/self/stat).
func startTime() (float64, bool) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: field 3 (state) is the first of them.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	const starttime = 22 - 3
	if len(f) <= starttime {
		return 0, false
	}
	ticks, err := strconv.ParseFloat(f[starttime], 64)
	if err != nil {
		return 0, false
	}
	boot, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(boot), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			btime, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, false
			}
			return btime + ticks/userHZ, true
		}
	}
	return 0, false
}
