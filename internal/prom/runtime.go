package prom

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// goCollector is the go_* families of the Prometheus Go client's default
// Go collector: goroutines, threads, GC pauses, memory statistics, GOGC,
// GOMEMLIMIT, GOMAXPROCS and the Go version.
type goCollector struct{}

// NewGoCollector returns the Go runtime families.
func NewGoCollector() Collector { return goCollector{} }

func gauge(name, help string, v float64) family {
	return family{name: name, help: help, typ: "gauge", series: []series{{samples: []sample{{v: v}}}}}
}

func counter(name, help string, v float64) family {
	return family{name: name, help: help, typ: "counter", series: []series{{samples: []sample{{v: v}}}}}
}

func (goCollector) families(out []family) []family {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	threads, _ := runtime.ThreadCreateProfile(nil)
	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	pauses := family{name: "go_gc_duration_seconds", help: "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.", typ: "summary"}
	var qs []sample
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		qs = append(qs, sample{extraName: "quantile", extraValue: q, v: gc.PauseQuantiles[i].Seconds()})
	}
	qs = append(qs, sample{suffix: "_sum", v: gc.PauseTotal.Seconds()}, sample{suffix: "_count", v: float64(gc.NumGC)})
	pauses.series = []series{{samples: qs}}
	rm := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}, {Name: "/sched/gomaxprocs:threads"}}
	metrics.Read(rm)
	u := func(i int) float64 {
		if rm[i].Value.Kind() == metrics.KindUint64 {
			return float64(rm[i].Value.Uint64())
		}
		return 0
	}
	info := family{name: "go_info", help: "Information about the Go environment.", typ: "gauge", labels: []string{"version"},
		series: []series{{values: []string{runtime.Version()}, samples: []sample{{v: 1}}}}}
	lastGC := float64(ms.LastGC) / 1e9
	return append(out, pauses, info,
		gauge("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine())),
		gauge("go_threads", "Number of OS threads created.", float64(threads)),
		gauge("go_gc_gogc_percent", "Heap size target percentage configured by the user, otherwise 100.", u(0)),
		gauge("go_gc_gomemlimit_bytes", "Go runtime memory limit configured by the user, otherwise math.MaxInt64.", u(1)),
		gauge("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting.", u(2)),
		gauge("go_memstats_alloc_bytes", "Number of heap bytes allocated and currently in use.", float64(ms.Alloc)),
		counter("go_memstats_alloc_bytes_total", "Total number of heap bytes allocated, even if freed.", float64(ms.TotalAlloc)),
		gauge("go_memstats_sys_bytes", "Number of bytes obtained from system.", float64(ms.Sys)),
		counter("go_memstats_mallocs_total", "Total number of heap objects allocated.", float64(ms.Mallocs)),
		counter("go_memstats_frees_total", "Total number of heap objects frees.", float64(ms.Frees)),
		gauge("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use.", float64(ms.HeapAlloc)),
		gauge("go_memstats_heap_sys_bytes", "Number of heap bytes obtained from system.", float64(ms.HeapSys)),
		gauge("go_memstats_heap_idle_bytes", "Number of heap bytes waiting to be used.", float64(ms.HeapIdle)),
		gauge("go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use.", float64(ms.HeapInuse)),
		gauge("go_memstats_heap_released_bytes", "Number of heap bytes released to OS.", float64(ms.HeapReleased)),
		gauge("go_memstats_heap_objects", "Number of currently allocated objects.", float64(ms.HeapObjects)),
		gauge("go_memstats_stack_inuse_bytes", "Number of bytes obtained from system for stack allocator in non-CGO environments.", float64(ms.StackInuse)),
		gauge("go_memstats_stack_sys_bytes", "Number of bytes obtained from system for stack allocator.", float64(ms.StackSys)),
		gauge("go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place.", float64(ms.NextGC)),
		gauge("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", lastGC),
	)
}
