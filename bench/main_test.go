package bench_test

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"testing"

	"github.com/sparsesync/sparsesync/localsync"
)

// execEnv makes the test binary the sparsesync side of a benchmark run:
// "SRC DST [PROFILE]" on the command line, a localsync.Copy made durable,
// as "sparsesync local" does. The tests need no go build.
const execEnv = "SPARSESYNC_BENCH_TEST_EXEC"

func TestMain(m *testing.M) {
	if os.Getenv(execEnv) == "1" {
		os.Exit(execCopy(os.Args[1:]))
	}
	os.Exit(m.Run())
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
	if _, err := localsync.Copy(context.Background(), args[0], args[1], localsync.Options{}); err != nil {
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
