package bench

import (
	"syscall"
	"testing"
	"time"
)

// TestBusyCPUCountsWork: the machine's busy CPU seconds over an interval
// count at least the CPU time this process spent spinning in it (the
// kernel's own account, getrusage, is the oracle), on an idle machine or a
// loaded one (others' work only adds to it).
func TestBusyCPUCountsWork(t *testing.T) {
	before := busyCPU()
	if before < 0 {
		t.Skip("no /proc/stat")
	}
	cpu0 := processCPU(t)
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); {
	}
	spent := processCPU(t) - cpu0
	busy := busySince(before)
	// /proc/stat counts in ticks of 10 ms: allow two per side.
	if busy < spent-0.04 {
		t.Fatalf("busy CPU %.3f s over an interval in which this process alone spent %.3f s", busy, spent)
	}
	if spent < 0.1 {
		t.Fatalf("the spin spent only %.3f s of CPU: the check says nothing", spent)
	}
}

func processCPU(t *testing.T) float64 {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
