//go:build !linux

package prom

import "syscall"

// processCollector is process_cpu_seconds_total and process_max_fds, what
// getrusage and getrlimit tell without /proc.
type processCollector struct{}

// NewProcessCollector returns the process families this system can give.
func NewProcessCollector() Collector { return processCollector{} }

func (processCollector) families(out []family) []family {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
		out = append(out, counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", cpu))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		out = append(out, gauge("process_max_fds", "Maximum number of open file descriptors.", float64(lim.Cur)))
	}
	return out
}
