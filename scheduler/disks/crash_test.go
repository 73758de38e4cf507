package disks_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/replica"
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
var steps = []string{"intent", "copy", "copied", "retired", "committed", "placed", "cleaned", "end"}

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

// longhornVisible lists, per name, the disks holding a directory Longhorn's
// manager would take for a replica directory: a direct subdirectory of the
// disk's replica directory whose name matches -[a-zA-Z0-9]{8}$ (longhorn-
// manager util.GetPossibleReplicaDirectoryNames runs `find DIR -maxdepth 1
// -mindepth 1 -type d -regex ".*-[a-zA-Z0-9]{8}$"`).
func longhornVisible(t *testing.T, dirs map[string]string) map[string][]string {
	t.Helper()
	re := regexp.MustCompile(`.*-[a-zA-Z0-9]{8}$`)
	out := map[string][]string{}
	for _, disk := range []string{"d1", "d2"} {
		ents, err := os.ReadDir(dirs[disk])
		require.NoError(t, err)
		for _, e := range ents {
			if e.IsDir() && re.MatchString(filepath.Join(dirs[disk], e.Name())) {
				out[e.Name()] = append(out[e.Name()], disk)
			}
		}
	}
	return out
}

// authoritative returns the directory that holds the replica called name
// after a kill, read the way docs/disks.md documents recovery: with no move
// record, its directory on the one disk holding it; with a record in phase
// copy, the source (its home, or .sparsesync-disks/retired.<id> once
// retired); in phase commit, the copy (its new home, or "new" beside the
// record before the placement).
func authoritative(t *testing.T, dirs map[string]string, name string) string {
	t.Helper()
	var recs []string
	for _, disk := range []string{"d1", "d2"} {
		m, err := filepath.Glob(filepath.Join(dirs[disk], disks.AgentDir, "*", disks.IntentFile))
		require.NoError(t, err)
		recs = append(recs, m...)
	}
	if len(recs) == 0 {
		var homes []string
		for _, disk := range []string{"d1", "d2"} {
			if _, err := os.Stat(filepath.Join(dirs[disk], name)); err == nil {
				homes = append(homes, filepath.Join(dirs[disk], name))
			}
		}
		require.Len(t, homes, 1, "no move record: the replica must be home on exactly one disk")
		return homes[0]
	}
	require.Len(t, recs, 1, "one move, one record")
	b, err := os.ReadFile(recs[0])
	require.NoError(t, err)
	var rec struct {
		ID, Phase, Replica, From, To string
		ToPath                       string `json:"to_path"`
	}
	require.NoError(t, json.Unmarshal(b, &rec))
	require.Equal(t, name, rec.Replica)
	require.Equal(t, filepath.Join(dirs[rec.To], disks.AgentDir, rec.ID, disks.IntentFile), recs[0], "the record lies on the target disk")
	pick := func(home, hidden string) string {
		_, herr := os.Stat(home)
		_, derr := os.Stat(hidden)
		require.True(t, (herr == nil) != (derr == nil), "exactly one of %s and %s must exist", home, hidden)
		if herr == nil {
			return home
		}
		return hidden
	}
	if rec.Phase == "commit" {
		return pick(filepath.Join(dirs[rec.To], name), filepath.Join(dirs[rec.To], disks.AgentDir, rec.ID, "new"))
	}
	require.Equal(t, "copy", rec.Phase)
	return pick(filepath.Join(dirs[rec.From], name), filepath.Join(dirs[rec.From], disks.AgentDir, disks.RetiredPrefix+rec.ID))
}

// childRun starts the crash child on cfg, blocking at killStep ("": only at
// the end of the pass).
func childRun(t *testing.T, exe string, cfg disks.Config, killStep string) (*exec.Cmd, *bytes.Buffer, string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "log")
	spec, err := json.Marshal(crashSpec{Config: cfg, Log: logPath, KillStep: killStep})
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+string(spec))
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	require.NoError(t, cmd.Start())
	return cmd, &stderr, logPath
}

// waitStep polls the child's log until it names step; it returns when the
// parent saw it.
func waitStep(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer, logPath, step string) time.Time {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !slices.Contains(readSteps(t, logPath), step) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child never reached %q (steps %v): %s", step, readSteps(t, logPath), stderr.String())
		}
		time.Sleep(time.Millisecond)
	}
	return time.Now()
}

func kill(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled(), "child was not killed: %s", stderr.String())
}

// TestKillDuringMove SIGKILLs the agent (a re-executed child) 20 times
// during a move of one replica between an ext4 and an XFS disk, a second
// replica staying on d1 throughout: 10 times at a named step of the move
// (every step in turn), 10 times at a random moment of the move (uniform
// over the duration of an uninterrupted move, measured first). At each kill
// Longhorn's scan sees the replica on at most one disk; after it a dry run
// changes nothing and names what recovery then does; recovery leaves each
// replica on exactly one disk, its export unchanged, nothing else.
func TestKillDuringMove(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary 21 times")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	dirs := map[string]string{
		"d1": subdir(t, mount(t, loopfs.Ext4), "replicas"),
		"d2": subdir(t, mount(t, loopfs.XFS), "replicas"),
	}
	name, bystander := repName(0), repName(99)
	sums := map[string]string{
		name:      writeReplica(t, filepath.Join(dirs["d1"], name), 24*mib, 16*mib, 1),
		bystander: writeReplica(t, filepath.Join(dirs["d1"], bystander), 4*mib, 2*mib, 99),
	}
	config := func(here string) disks.Config {
		other := map[string]string{"d1": "d2", "d2": "d1"}[here]
		return disks.Config{
			Disks: []disks.DiskConfig{
				{Name: here, Path: dirs[here], ReservedBytes: 1 << 40}, // always under pressure
				{Name: other, Path: dirs[other]},
			},
			PressurePercent: ptr(90),
		}
	}

	// Calibration: one whole move, d1 → d2, timed as the parent sees it.
	cmd, stderr, logPath := childRun(t, exe, config("d1"), "")
	t0 := waitStep(t, cmd, stderr, logPath, "intent")
	window := waitStep(t, cmd, stderr, logPath, "end").Sub(t0)
	kill(t, cmd, stderr)
	a, err := disks.New(config("d1"))
	require.NoError(t, err)
	require.NoError(t, a.Close())
	require.Equal(t, map[string]string{name: "d2", bystander: "d1"}, checkClean(t, config("d1"), sums))
	t.Logf("an uninterrupted move takes %v from the record to the end of the pass", window)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	here := "d2"
	const reps = 20
	inside := 0
	for rep := range reps {
		cfg := config(here)
		other := cfg.Disks[1].Name
		killStep := ""
		if rep%2 == 0 {
			killStep = steps[(rep/2)%len(steps)]
		}
		cmd, stderr, logPath := childRun(t, exe, cfg, killStep)
		if killStep != "" {
			waitStep(t, cmd, stderr, logPath, killStep)
		} else {
			start := waitStep(t, cmd, stderr, logPath, "intent")
			time.Sleep(time.Until(start.Add(time.Duration(rng.Int64N(int64(window))))))
		}
		kill(t, cmd, stderr)
		seen := readSteps(t, logPath)
		last := seen[len(seen)-1]
		if killStep == "" && last != "end" {
			inside++
		}

		// Longhorn's scan never finds the moving replica twice; the
		// bystander stays where it is.
		lh := longhornVisible(t, dirs)
		require.LessOrEqual(t, len(lh[name]), 1, "rep %d: killed after %q: Longhorn would see %s on %v", rep, last, name, lh[name])
		require.Equal(t, []string{"d1"}, lh[bystander], "rep %d", rep)
		require.Len(t, lh, len(lh[name])+1, "rep %d: Longhorn would see %v", rep, lh)

		// The replica's one authoritative directory, found as docs/disks.md
		// says (the record's phase), is one replica check accepts, with
		// the content it had.
		auth := authoritative(t, dirs, name)
		rpt, err := replica.Check([]string{auth}, nil)
		require.NoError(t, err, "rep %d: killed after %q: %s", rep, last, auth)
		require.Equal(t, []string{auth}, rpt.RW, "rep %d: killed after %q: %s", rep, last, auth)
		require.Equal(t, sums[name], exportSum(t, auth), "rep %d: killed after %q: %s", rep, last, auth)

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
		dryWould := ""
		for _, e := range dryRec.kinds(disks.EventSkip) {
			switch {
			case strings.Contains(e.Reason, "interrupted move would be completed"):
				dryWould = disks.EventMoveDone
			case strings.Contains(e.Reason, "interrupted move would be rolled back"):
				dryWould = disks.EventMoveFailed
			}
		}

		// Rerun: recovery completes or rolls back.
		var rec recorder
		cfg.OnEvent = rec.on
		a, err := disks.New(cfg)
		require.NoError(t, err, "rep %d: recovery after a kill at %q", rep, last)
		require.NoError(t, a.Close())
		did := ""
		if n := len(rec.events); n > 0 {
			require.Equal(t, 1, n, "rep %d: %v", rep, kinds(rec.events))
			did = rec.events[0].Kind
		}
		require.Equal(t, dryWould, did, "rep %d: the dry run must report exactly what recovery does", rep)
		loc := checkClean(t, cfg, sums)
		require.Equal(t, "d1", loc[bystander], "rep %d", rep)
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
	t.Logf("%d of the %d random kills fell before the end of the pass", inside, reps/2)
}

// TestKillDuringRecovery: a move is killed, then the agent that recovers
// it is killed in the middle of the recovery (rolling forward: after the
// copy took the replica's name, before the source went; rolling back:
// after the copy went, before the source got its name back); a third start
// finishes the recovery the first one began.
func TestKillDuringRecovery(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	dirs := map[string]string{
		"d1": subdir(t, mount(t, loopfs.Ext4), "replicas"),
		"d2": subdir(t, mount(t, loopfs.Ext4), "replicas"),
	}
	name := repName(0)
	sums := map[string]string{name: writeReplica(t, filepath.Join(dirs["d1"], name), 8*mib, 4*mib, 1)}
	cfg := disks.Config{
		Disks:           []disks.DiskConfig{{Name: "d1", Path: dirs["d1"], ReservedBytes: 1 << 40}, {Name: "d2", Path: dirs["d2"]}},
		PressurePercent: ptr(90),
	}
	// The replica starts on d1; the first case leaves it there.
	for _, tc := range []struct{ moveStep, recoveryStep, want string }{
		{"retired", "unstaged", "d1"}, // phase copy: rolled back
		{"committed", "placed", "d2"}, // phase commit: completed
	} {
		cmd, stderr, logPath := childRun(t, exe, cfg, tc.moveStep)
		waitStep(t, cmd, stderr, logPath, tc.moveStep)
		kill(t, cmd, stderr)
		cmd, stderr, logPath = childRun(t, exe, cfg, tc.recoveryStep)
		waitStep(t, cmd, stderr, logPath, tc.recoveryStep)
		kill(t, cmd, stderr)
		lh := longhornVisible(t, dirs)
		require.LessOrEqual(t, len(lh[name]), 1, "killed in recovery at %q: Longhorn would see %v", tc.recoveryStep, lh)
		require.Equal(t, sums[name], exportSum(t, authoritative(t, dirs, name)))
		var rec recorder
		c := cfg
		c.OnEvent = rec.on
		a, err := disks.New(c)
		require.NoError(t, err, "after a kill in recovery at %q", tc.recoveryStep)
		require.NoError(t, a.Close())
		require.Len(t, rec.events, 1)
		require.Equal(t, map[string]string{name: tc.want}, checkClean(t, cfg, sums), "killed in recovery at %q", tc.recoveryStep)
	}
}

func kinds(es []disks.Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Kind)
	}
	return out
}
