package bench

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBusyCPUCountsWork: the machine's busy CPU seconds over an interval
// count at least the CPU time one thread of this process spent spinning in
// it (the kernel's own account of that thread is the oracle), on an idle
// machine or a loaded one: the spin runs until the thread has had its CPU
// time, however long that takes, and others' work only adds to the busy
// time.
func TestBusyCPUCountsWork(t *testing.T) {
	before := busyCPU()
	if before < 0 {
		t.Skip("no /proc/stat")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const spin = 300 * time.Millisecond
	start := threadCPU(t)
	var x uint64 = 1
	for threadCPU(t)-start < spin {
		for range 100_000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	spent := (threadCPU(t) - start).Seconds()
	busy := busySince(before)
	// /proc/stat counts in ticks of 10 ms: allow two per CPU side.
	if busy < spent-0.04 {
		t.Fatalf("busy CPU %.3f s over an interval in which one thread of this process alone spent %.3f s (%d)", busy, spent, x&1)
	}
}

func threadCPU(t *testing.T) time.Duration {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ts.Nano())
}
