package main

import (
	"context"
	"errors"
	"io"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/bench"
)

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// TestBenchPartialPrintError: when the finished cases cannot be printed,
// the error says so with the cause, and both the session's error and the
// write's are matched by errors.Is (not read back from text).
func TestBenchPartialPrintError(t *testing.T) {
	rep := &bench.Report{Cases: []bench.Case{{}}}
	err := benchPartial(failingWriter{syscall.ENOSPC}, &benchOpts{json: true}, rep, 3, context.Canceled)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.Contains(t, err.Error(), "stopped after 1 of 3 cases (their results not printed: no space left on device)")
	var n noter
	require.True(t, errors.As(err, &n))

	err = benchPartial(io.Discard, &benchOpts{json: true}, rep, 3, context.Canceled)
	require.ErrorIs(t, err, context.Canceled)
	require.Contains(t, err.Error(), "stopped after 1 of 3 cases (their results printed above)")
}
