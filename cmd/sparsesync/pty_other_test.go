//go:build !linux

package main

import (
	"os"
	"testing"
)

// openPTY: the terminal tests use Linux's /dev/ptmx ioctls.
func openPTY(t *testing.T) (tty *os.File, output func() string) {
	t.Skip("the pseudo-terminal helper is Linux's (/dev/ptmx ioctls)")
	return nil, nil
}
