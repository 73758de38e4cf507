package bench_test

import (
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/bench"
)

// burnCPU spins until this process has used d more CPU time (not wall
// time: the profiler samples CPU time, so the sample count does not depend
// on the machine's load).
//
//go:noinline
func burnCPU(d time.Duration) uint64 {
	start := cpuTime()
	var x uint64 = 1
	for cpuTime()-start < d {
		for range 100_000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	return x
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
	if sum.Total < 0.3 || len(sum.Files) != 2 || len(sum.Flat) == 0 || len(sum.Cum) == 0 {
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
