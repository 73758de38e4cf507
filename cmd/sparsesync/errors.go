package main

import (
	"context"
	"errors"
	"strings"
)

// exitCode maps an error to the documented exit status.
func exitCode(ctx context.Context, err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return 130
	case errors.As(err, new(usageError)):
		return 2
	default:
		return 1
	}
}

// errorLine renders err as exactly one line for stderr.
func errorLine(err error) string {
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	if !strings.HasPrefix(msg, "sparsesync") {
		msg = "sparsesync: " + msg
	}
	return msg
}
