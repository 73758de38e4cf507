package qos

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// IOClass is an I/O scheduling class (ioprio_set(2)). The real-time class
// needs CAP_SYS_ADMIN and would starve the node's other work; it is not
// offered.
type IOClass int

const (
	IOClassNone       IOClass = 0 // leave the priority as it is
	IOClassBestEffort IOClass = 2 // the default class, levels 0 (highest) to 7
	IOClassIdle       IOClass = 3 // I/O only when no other process wants the disk
)

// IOPriority is a class and, for best-effort, a level from 0 to 7.
type IOPriority struct {
	Class IOClass
	Level int
}

// ErrBadIOPriority is returned by ParseIOPriority.
var ErrBadIOPriority = errors.New("qos: bad I/O priority")

// ParseIOPriority reads "idle", "best-effort" (level 4, the kernel's
// default for a process of nice 0) or "best-effort:N" with N from 0 to 7.
// The empty string means leave the priority alone.
func ParseIOPriority(s string) (IOPriority, error) {
	class, level, hasLevel := strings.Cut(s, ":")
	switch class {
	case "":
		if !hasLevel {
			return IOPriority{}, nil
		}
	case "idle":
		if !hasLevel {
			return IOPriority{Class: IOClassIdle}, nil
		}
	case "best-effort":
		if !hasLevel {
			return IOPriority{Class: IOClassBestEffort, Level: 4}, nil
		}
		if n, err := strconv.Atoi(level); err == nil && n >= 0 && n <= 7 {
			return IOPriority{Class: IOClassBestEffort, Level: n}, nil
		}
	}
	return IOPriority{}, fmt.Errorf("%w %q: want idle, best-effort or best-effort:0-7", ErrBadIOPriority, s)
}

func (p IOPriority) String() string {
	switch p.Class {
	case IOClassIdle:
		return "idle"
	case IOClassBestEffort:
		return fmt.Sprintf("best-effort:%d", p.Level)
	case IOClassNone:
		return "unchanged"
	}
	return fmt.Sprintf("class %d level %d", p.Class, p.Level)
}
