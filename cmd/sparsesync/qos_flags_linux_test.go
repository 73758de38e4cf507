package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestIoniceSetsThePriority: `local --ionice best-effort:7` leaves every
// thread of the process at that I/O priority, as ioprio_get(2) reads it
// thread by thread (the kernel's word, not qos's). It runs the command in
// a child process: the priority would otherwise stay on this one's threads.
func TestIoniceSetsThePriority(t *testing.T) {
	if os.Getenv("SPARSESYNC_IONICE_CHILD") != "" {
		t.Skip("run by its parent")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	require.NoError(t, os.WriteFile(src, []byte("some data"), 0o644))
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestIoniceChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "SPARSESYNC_IONICE_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "--- PASS: TestIoniceChild")
}

func TestIoniceChild(t *testing.T) {
	dir := os.Getenv("SPARSESYNC_IONICE_CHILD")
	if dir == "" {
		t.Skip("run by TestIoniceSetsThePriority")
	}
	_, errOut, code, _ := runCLI(t, "local", "--ionice", "best-effort:7", filepath.Join(dir, "src"), filepath.Join(dir, "dst"))
	require.Equal(t, 0, code, errOut)
	tasks, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	const ioprioWhoProcess, classBE, want = 1, 2, 2<<13 | 7
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		require.NoError(t, err)
		v, _, e := unix.Syscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, uintptr(tid), 0)
		if e == unix.ESRCH {
			continue // the thread has just exited
		}
		require.Zero(t, e)
		require.Equal(t, want, int(v), "thread %d: class %d level %d, want best-effort (%d) level 7", tid, v>>13, v&(1<<13-1), classBE)
	}
}
