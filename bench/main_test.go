package bench_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"testing"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/localsync"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// execEnv makes the test binary the sparsesync side of a benchmark run:
// "SRC DST [PROFILE]" on the command line, a localsync.Copy made durable,
// as "sparsesync local" does. The tests need no go build.
const execEnv = "SPARSESYNC_BENCH_TEST_EXEC"

func TestMain(m *testing.M) {
	if os.Getenv(execEnv) == "1" {
		switch {
		case len(os.Args) > 1 && os.Args[1] == "serve":
			os.Exit(execServe(os.Args[2:]))
		case len(os.Args) > 1 && os.Args[1] == "push":
			os.Exit(execPush(os.Args[2:]))
		}
		os.Exit(execCopy(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// execServe is "sparsesync serve --root ROOT --listen ADDR --no-auth":
// "serve ROOT ADDR", until SIGTERM.
func execServe(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &tcpsync.Server{Root: args[0], NoAuth: true}
	if err := srv.Serve(ctx, ln); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// execPush is "sparsesync push --no-auth --retries 0 SRC ADDR REMOTE":
// "push SRC ADDR REMOTE".
func execPush(args []string) int {
	if _, err := tcpsync.PushFile(context.Background(), args[1], args[0], args[2], &tcpsync.Options{NoAuth: true, MaxAttempts: 1}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func execCopy(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: SRC DST [PROFILE]")
		return 2
	}
	if len(args) > 2 && args[2] != "" {
		f, err := os.Create(args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if _, err := localsync.Copy(context.Background(), args[0], args[1], &localsync.Options{Manifest: true}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// selfCommand runs this test binary as the sparsesync side.
func selfCommand(t testing.TB) func(src, dst, profile string) []string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(execEnv, "1") // inherited by the children only for the test's duration
	return func(src, dst, profile string) []string { return []string{exe, src, dst, profile} }
}

// selfNet makes the test binary sparsesync's network side too.
func selfNet(t testing.TB, cfg *bench.Config) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg.SparsesyncServe = func(root, addr string) []string { return []string{exe, "serve", root, addr} }
	cfg.SparsesyncPush = func(src, addr, remote string) []string { return []string{exe, "push", src, addr, remote} }
}
