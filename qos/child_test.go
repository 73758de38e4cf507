package qos

import (
	"os"
	"os/exec"
	"testing"
)

// runInChild runs one test of this package in a new process with env set,
// and fails with its output if it fails.
func runInChild(t *testing.T, test string, env ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", test, err, out)
	}
	t.Logf("%s", out)
}

func childEnv(name string) string { return os.Getenv(name) }
