// Command sparsesync copies and synchronises sparse files exactly and fast.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	g := &globalOpts{stdout: os.Stdout, stderr: os.Stderr}
	code := run(ctx, g, os.Args[1:])
	stop()
	os.Exit(code)
}
