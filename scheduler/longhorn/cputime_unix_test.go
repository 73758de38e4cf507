//go:build unix

package longhorn

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) the process has used, for the
// benchmarks' cpu-ms/op figure on a loaded machine where wall time says
// little.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
