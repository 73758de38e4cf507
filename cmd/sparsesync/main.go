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
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
	}
	os.Exit(exitCode(ctx, err))
}
