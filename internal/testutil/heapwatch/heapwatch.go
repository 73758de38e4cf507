// Package heapwatch measures how much a test's code grows the Go heap,
// through runtime/metrics: the peak growth of a counter of bytes over a
// baseline, sampled every 2 ms until stopped.
package heapwatch

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// LiveGC watches the heap marked live by the last collection
// (/gc/heap/live:bytes: what is held, no garbage) with a collection forced
// every 20 ms, so the live heap is measured at a steady pace whatever the
// pacer and the load do, from a baseline without pooled buffers: two
// collections come first, as a sync.Pool keeps its buffers through one
// (its victim cache), and a baseline holding the last run's pooled buffers
// measured the next one at a sixth of its growth.
func LiveGC(t testing.TB) (stop func() uint64) {
	t.Helper()
	runtime.GC()
	runtime.GC()
	stopWatch := Metric(t, "/gc/heap/live:bytes")
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				runtime.GC()
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return stopWatch()
	}
}

// Metric samples a runtime/metrics counter of bytes (name) until stopped
// and returns its peak growth over the baseline taken at start, after a
// collection.
func Metric(t testing.TB, name string) (stop func() uint64) {
	t.Helper()
	runtime.GC()
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	base := s[0].Value.Uint64()
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-tk.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		if peak < base {
			return 0
		}
		return peak - base
	}
}
