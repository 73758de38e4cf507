package bench_test

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/bench"
)

// burnCPU spins until its own thread has used d more CPU time: not wall
// time, as the profiler samples CPU time, and not the process's, which
// the package's parallel tests (a report's floor runs in this process)
// also spend, so that a loaded machine stops it no earlier.
//
//go:noinline
func burnCPU(d time.Duration) uint64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	var x uint64 = 1
	for threadCPU()-start < d {
		for range 100_000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	return x
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// TestSummarizeProfiles records two real CPU profiles of a function that
// burns CPU and checks the summary finds it at the top, with its time.
func TestSummarizeProfiles(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for i := range 2 {
		p := filepath.Join(dir, "cpu"+string(rune('0'+i))+".pprof")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		burnCPU(300 * time.Millisecond)
		pprof.StopCPUProfile()
		f.Close()
		files = append(files, p)
	}
	sum, err := bench.SummarizeProfiles(files, 5)
	if err != nil {
		t.Fatal(err)
	}
	// 0.6 s burnt, but at ten times the load this machine can carry Go's
	// profiler kept 0.11-0.26 s of it: ask for a few samples, not all.
	if sum.Total < 0.05 || len(sum.Files) != 2 || len(sum.Flat) == 0 || len(sum.Cum) == 0 {
		t.Fatalf("summary %+v", sum)
	}
	const fn = "bench_test.burnCPU"
	if !strings.HasSuffix(sum.Flat[0].Func, fn) || sum.Flat[0].Share < 0.5 {
		t.Errorf("top flat %+v, want %s with most of the time", sum.Flat[0], fn)
	}
	var inCum bool
	for i, f := range sum.Cum {
		if strings.HasSuffix(f.Func, fn) {
			inCum = f.Seconds >= sum.Flat[0].Seconds
		}
		if i > 0 && f.Seconds > sum.Cum[i-1].Seconds {
			t.Errorf("cumulative list not sorted: %+v", sum.Cum)
		}
	}
	if !inCum {
		t.Errorf("%s not in the cumulative top with at least its flat time: %+v", fn, sum.Cum)
	}
	if _, err := bench.SummarizeProfiles([]string{filepath.Join(dir, "missing")}, 5); err == nil {
		t.Error("a missing profile was accepted")
	}
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("not a profile"), 0o644)
	if _, err := bench.SummarizeProfiles([]string{bad}, 5); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a corrupt profile: %v, want an error naming it", err)
	}
}
