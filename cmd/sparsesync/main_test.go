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
	var out, errOut bytes.Buffer
	g := &globalOpts{stdout: &out, stderr: &errOut}
	root := newRootCommand(g)
	root.SetArgs(args)
	ctx := context.Background()
	err = root.ExecuteContext(ctx)
	if err != nil {
		errOut.WriteString(errorLine(err) + "\n")
	}
	return out.String(), errOut.String(), exitCode(ctx, err), err
}
