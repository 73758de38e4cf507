// Command sparsesync copies and synchronises sparse files exactly and fast.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	g := &globalOpts{stdout: os.Stdout, stderr: os.Stderr}
	err := newRootCommand(g).ExecuteContext(ctx)
	code := exitCode(ctx, err) // before stop: stop cancels ctx
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
	}
	os.Exit(code)
}
