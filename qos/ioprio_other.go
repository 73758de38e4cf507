//go:build !linux

package qos

import (
	"errors"
	"fmt"
)

// SetIOPriority is supported on Linux only; elsewhere a non-zero p fails
// with errors.ErrUnsupported.
func SetIOPriority(p IOPriority) error {
	if p.Class == IOClassNone {
		return nil
	}
	return fmt.Errorf("I/O priority %s: %w", p, errors.ErrUnsupported)
}
