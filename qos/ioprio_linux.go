package qos

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

const (
	ioprioWhoProcess = 1 // IOPRIO_WHO_PROCESS: one thread, by id
	ioprioClassShift = 13
)

// SetIOPriority sets the I/O priority of every thread of this process.
// Threads the Go runtime starts later are cloned from these and inherit
// it, so every goroutine's I/O runs at p from then on. A zero p does
// nothing.
func SetIOPriority(p IOPriority) error {
	if p.Class == IOClassNone {
		return nil
	}
	value := int(p.Class)<<ioprioClassShift | p.Level
	// A thread may start while the list is read; a second pass catches it
	// (it was cloned from a thread of the first pass at the latest then).
	for range 2 {
		tids, err := threads()
		if err != nil {
			return err
		}
		for _, tid := range tids {
			_, _, e := unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, uintptr(tid), uintptr(value))
			if e != 0 && e != unix.ESRCH { // a thread that has just exited
				return fmt.Errorf("ioprio_set %s for thread %d: %w", p, tid, e)
			}
		}
	}
	return nil
}

// threadIOPriority is the priority of one thread (ioprio_get).
func threadIOPriority(tid int) (IOPriority, error) {
	v, _, e := unix.Syscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, uintptr(tid), 0)
	if e != 0 {
		return IOPriority{}, fmt.Errorf("ioprio_get for thread %d: %w", tid, e)
	}
	return IOPriority{Class: IOClass(v >> ioprioClassShift), Level: int(v & (1<<ioprioClassShift - 1))}, nil
}

func threads() ([]int, error) {
	d, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("listing this process's threads: %w", err)
	}
	tids := make([]int, 0, len(d))
	for _, e := range d {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
