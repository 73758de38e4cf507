package qos

import (
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSetIOPriorityEveryThread checks with ioprio_get, thread by thread,
// that the priority reaches every thread of the process, including threads
// the runtime starts afterwards. It runs in a child process: the
// priority, once lowered, cannot be raised back by a normal user.
func TestSetIOPriorityEveryThread(t *testing.T) {
	for _, p := range []IOPriority{{Class: IOClassBestEffort, Level: 6}, {Class: IOClassIdle}} {
		t.Run(p.String(), func(t *testing.T) {
			runInChild(t, "TestIOPriorityChild", "SPARSESYNC_QOS_IOPRIO="+p.String())
		})
	}
}

func TestIOPriorityChild(t *testing.T) {
	want, err := ParseIOPriority(childEnv("SPARSESYNC_QOS_IOPRIO"))
	if err != nil || want.Class == IOClassNone {
		t.Skip("run by TestSetIOPriorityEveryThread")
	}
	if err := SetIOPriority(want); err != nil {
		t.Fatal(err)
	}
	// Start new OS threads: goroutines that lock their thread while others
	// block in system calls make the runtime clone more.
	var wg sync.WaitGroup
	got := make(chan IOPriority, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // this thread dies with the goroutine
			p, err := threadIOPriority(unix.Gettid())
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
	}
	wg.Wait()
	close(got)
	for p := range got {
		if p != want {
			t.Errorf("a thread started after SetIOPriority(%s) has %s", want, p)
		}
	}
	tids, err := threads()
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		if p, err := threadIOPriority(tid); err == nil && p != want {
			t.Errorf("thread %d has %s, want %s", tid, p, want)
		}
	}
}
