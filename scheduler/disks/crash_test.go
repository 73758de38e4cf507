package disks_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/loopfs"
	"github.com/sparsesync/sparsesync/scheduler/disks"
)

// The crash tests run the agent in a child process (this test binary,
// re-executed into TestCrashChild), SIGKILL it at a step of a move or at a
// random moment of the copy, then start an agent again (which recovers)
// and check that the replica is on exactly one disk, intact, and nothing
// else is left.

const crashChildEnv = "SPARSESYNC_DISKS_CRASH_CHILD"

type crashSpec struct {
	Config disks.Config
	Log    string
	// KillStep: the child blocks at this step (the parent kills it
	// there); "" means it never blocks before the end of the pass.
	KillStep string
}

// steps are the move's steps in order, then "end" (the pass is over).
var steps = []string{"intent", "linked", "copy", "copied", "retired", "committed", "placed", "cleaned", "end"}

func TestCrashChild(t *testing.T) {
	raw := os.Getenv(crashChildEnv)
	if raw == "" {
		t.Skip("helper process of the crash tests")
	}
	var spec crashSpec
	require.NoError(t, json.Unmarshal([]byte(raw), &spec))
	logf, err := os.OpenFile(spec.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	require.NoError(t, err)
	mark := func(step string) {
		if _, err := logf.Write([]byte(step + "\n")); err != nil { // one write(2): in the kernel on return
			panic(err)
		}
		if step == spec.KillStep || step == "end" {
			select {} // wait for the kill
		}
	}
	cfg := spec.Config
	disks.SetStepHook(&cfg, mark)
	a, err := disks.New(cfg)
	require.NoError(t, err)
	_, err = a.Pass(t.Context())
	require.NoError(t, err)
	mark("end")
}

func readSteps(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func TestKillDuringMove(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary 20 times")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	dirs := map[string]string{
		"d1": subdir(t, mount(t, loopfs.Ext4), "replicas"),
		"d2": subdir(t, mount(t, loopfs.XFS), "replicas"),
	}
	name := repName(0)
	sums := map[string]string{name: writeReplica(t, filepath.Join(dirs["d1"], name), 8*mib, 6*mib, 1)}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	here := "d1"
	const reps = 20
	for rep := range reps {
		other := map[string]string{"d1": "d2", "d2": "d1"}[here]
		cfg := disks.Config{
			Disks: []disks.DiskConfig{
				{Name: here, Path: dirs[here], ReservedBytes: 1 << 40}, // always under pressure
				{Name: other, Path: dirs[other]},
			},
			PressurePercent: ptr(90),
		}
		killStep := ""
		if rep%2 == 0 {
			killStep = steps[(rep/2)%len(steps)]
		}
		logPath := filepath.Join(t.TempDir(), "log")
		spec, err := json.Marshal(crashSpec{Config: cfg, Log: logPath, KillStep: killStep})
		require.NoError(t, err)
		cmd := exec.Command(exe, "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+string(spec))
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		require.NoError(t, cmd.Start())
		waitFor := killStep
		if waitFor == "" {
			waitFor = "copy"
		}
		deadline := time.Now().Add(30 * time.Second)
		for !slices.Contains(readSteps(t, logPath), waitFor) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("rep %d: child never reached %q (steps %v): %s", rep, waitFor, readSteps(t, logPath), stderr.String())
			}
			time.Sleep(2 * time.Millisecond)
		}
		if killStep == "" {
			time.Sleep(time.Duration(rng.IntN(600_000)) * time.Microsecond)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		cmd.Wait()
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		require.True(t, ok && ws.Signaled(), "rep %d: child was not killed: %s", rep, stderr.String())
		seen := readSteps(t, logPath)
		last := seen[len(seen)-1]

		// A dry run reports the interrupted move and changes nothing.
		dry := cfg
		dry.DryRun = true
		var dryRec recorder
		dry.OnEvent = dryRec.on
		before := snapshotTree(t, dirs["d1"], dirs["d2"])
		da, err := disks.New(dry)
		require.NoError(t, err)
		_, err = da.Pass(t.Context())
		require.NoError(t, err)
		require.NoError(t, da.Close())
		require.Equal(t, before, snapshotTree(t, dirs["d1"], dirs["d2"]), "rep %d: dry run changed the disks", rep)
		pendingMove := false
		for _, e := range dryRec.kinds(disks.EventSkip) {
			pendingMove = pendingMove || strings.Contains(e.Reason, "interrupted move would be")
		}

		// Rerun: recovery completes or rolls back.
		var rec recorder
		cfg.OnEvent = rec.on
		a, err := disks.New(cfg)
		require.NoError(t, err, "rep %d: recovery after a kill at %q", rep, last)
		require.NoError(t, a.Close())
		recovered := len(rec.kinds(disks.EventMoveDone)) + len(rec.kinds(disks.EventMoveFailed))
		require.Equal(t, pendingMove, recovered > 0, "rep %d: the dry run must report exactly the moves recovery acts on", rep)
		loc := checkClean(t, cfg, sums)
		committed := slices.Index(steps, last) >= slices.Index(steps, "committed")
		switch {
		case committed:
			require.Equal(t, other, loc[name], "rep %d: killed after the commit (%q): the move must complete", rep, last)
		case last == "retired" && killStep == "":
			// The commit may have been written after the last mark.
		default:
			require.Equal(t, here, loc[name], "rep %d: killed before the commit (%q): the move must roll back", rep, last)
		}
		t.Logf("rep %2d: killed after %-9s → replica on %s (recovery: %s)", rep, last, loc[name], strings.Join(kinds(rec.events), ","))
		here = loc[name]
	}
}

func kinds(es []disks.Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Kind)
	}
	return out
}
