package main

import (
	"bytes"
	"context"
	"testing"
)

// runCLI runs "sparsesync args..." in-process the way main does: stdout,
// stderr (ending with main's one error line on failure), the exit status main
// would use, and the error itself.
func runCLI(t testing.TB, args ...string) (stdout, stderr string, code int, err error) {
	t.Helper()
	return runCLIContext(context.Background(), args...)
}

// runCLIContext is runCLI under ctx (cancel it to play Ctrl-C).
func runCLIContext(ctx context.Context, args ...string) (stdout, stderr string, code int, err error) {
	var out, errOut bytes.Buffer
	g := &globalOpts{stdout: &out, stderr: &errOut}
	cmd, wrote, err := execute(ctx, g, args)
	code = report(ctx, g, cmd, wrote, err)
	return out.String(), errOut.String(), code, err
}
