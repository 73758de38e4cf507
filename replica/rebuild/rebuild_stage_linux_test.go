package rebuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/replica"
	"io"
	"io/fs"
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

	"github.com/sparsesync/sparsesync/localsync"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// longhornAdopts is an independent model of what Longhorn's engine does
// when it opens dir as a replica (longhorn-engine pkg/replica/replica.go,
// construct with readonly false and no head given), reduced to whether it
// takes the directory for an existing replica and opens its chain:
//
//   - tryRecoverVolumeMetaFile / checkValidVolumeMetaData: volume.meta is
//     decoded; if it is missing or empty (io.EOF) the head is the first
//     entry of os.ReadDir (sorted) whose name contains "volume-head"
//     (types.VolumeHeadName), and volume.meta is re-created from it; any
//     other decode error fails construct.
//   - readMetadata: every entry ending in ".meta" but volume.meta is a
//     disk (readDiskData decodes it; an error fails construct); exists is
//     "at least one disk". Without one construct creates a new, empty head
//     (size > 0) or fails: no existing data is taken.
//   - openLiveChain / Chain: from the head through the disks' Parent
//     links; a name without a disk fails ("failed to find metadata"), as
//     does an empty head (construct would dereference a missing disk).
//   - openFile opens each chain image with sparse-tools
//     NewDirectFileIoProcessor(..., isCreate=true): a missing image is
//     created empty, so missing images do not stop it.
//
// It reports whether construct opens an existing chain, and why not.
func longhornAdopts(dir string) (bool, string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, err.Error()
	}
	var info struct{ Head string }
	f, err := os.Open(filepath.Join(dir, "volume.meta"))
	switch {
	case err == nil:
		derr := json.NewDecoder(f).Decode(&info)
		f.Close()
		if derr != nil && !errors.Is(derr, io.EOF) {
			return false, "volume.meta does not decode: construct fails"
		}
		if derr != nil {
			info.Head = ""
			err = fs.ErrNotExist // empty: recovered like a missing one
		}
	case !errors.Is(err, fs.ErrNotExist):
		return false, err.Error()
	}
	if err != nil {
		for _, e := range ents {
			if strings.Contains(e.Name(), "volume-head") {
				info.Head = e.Name()
				break
			}
		}
	}
	disks := map[string]string{}
	for _, e := range ents {
		n := e.Name()
		if n == "volume.meta" || !strings.HasSuffix(n, ".meta") {
			continue
		}
		var d struct{ Parent string }
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil || json.Unmarshal(b, &d) != nil {
			return false, n + " does not decode: construct fails"
		}
		disks[strings.TrimSuffix(n, ".meta")] = d.Parent
	}
	if len(disks) == 0 {
		return false, "no disk: nothing existing is opened"
	}
	if info.Head == "" {
		return false, "no head: construct fails"
	}
	for cur, n := info.Head, 0; cur != ""; n++ {
		parent, ok := disks[cur]
		if !ok {
			return false, "chain: no metadata for " + cur
		}
		if n > 250 {
			return false, "chain too long"
		}
		cur = parent
	}
	return true, "opens the chain from " + info.Head
}

// copyTree copies the regular files of dir from to a new directory to,
// holes kept (a layer's allocated blocks hide the layers below it).
func copyTree(t testing.TB, from, to string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(to, 0o700))
	ents, err := os.ReadDir(from)
	require.NoError(t, err)
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		_, err := localsync.Copy(context.Background(), filepath.Join(from, e.Name()), filepath.Join(to, e.Name()), nil)
		require.NoError(t, err)
	}
}

const stageChildEnv = "SPARSESYNC_STAGE_CHILD"

type stageChildSpec struct {
	Source, Target, Ready string
	Mode                  string // "local", "tcp" (TCP only) or "add" (Volume.AddReplica)
	KillAt                int    // kill the process inside this call of the step hook (0-based); -1: never
	Slow                  bool   // pause 3 ms in each call of the step hook
}

// TestRebuildStageChild is the child process of TestRebuildKilledNeverAdoptable.
func TestRebuildStageChild(t *testing.T) {
	raw := os.Getenv(stageChildEnv)
	if raw == "" {
		t.Skip("helper process of TestRebuildKilledNeverAdoptable")
	}
	var spec stageChildSpec
	require.NoError(t, json.Unmarshal([]byte(raw), &spec))
	calls := 0
	hook := func(step, name string) error {
		if calls == spec.KillAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		calls++
		if spec.Slow {
			time.Sleep(3 * time.Millisecond)
		}
		return nil
	}
	require.NoError(t, os.WriteFile(spec.Ready, []byte("R"), 0o600))
	require.NoError(t, runStaged(t, spec.Mode, spec.Source, spec.Target, hook))
	require.NoError(t, os.WriteFile(spec.Ready, []byte("D"), 0o600))
}

// runStaged rebuilds target from source the way mode says, with hook as
// the step hook.
func runStaged(t *testing.T, mode, source, target string, hook func(step, name string) error) error {
	o := &Options{fault: hook}
	switch mode {
	case "local":
		_, err := Rebuild(t.Context(), source, target, o)
		return err
	case "tcp":
		o.Remote, o.RemoteDir, o.TCP = serveDir(t, source), filepath.Base(source), tcpsync.Options{NoAuth: true, MaxAttempts: 1}
		_, err := Rebuild(t.Context(), "", target, o)
		return err
	case "add":
		v, err := replica.OpenVolume([]string{source}, nil)
		if err != nil {
			return err
		}
		_, err = AddReplica(t.Context(), v, target, o)
		return errors.Join(err, v.Close())
	}
	return fmt.Errorf("mode %q", mode)
}

type step struct{ Step, Name string }

// A rebuild (local, TCP, AddReplica) killed with SIGKILL at any point,
// into a target that holds an older copy (an incremental rebuild), never
// leaves a target that Longhorn (longhornAdopts) or we (Open) would take
// for a replica unless it has committed, and then it holds the source's
// content; an older copy stays adoptable only until the rebuild first
// touches it. A rerun completes and leaves no staging directory. Kills
// land in each call of the step hook in turn, then at random moments.
func TestRebuildKilledNeverAdoptable(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	root := t.TempDir()
	const size = 2 << 20
	src := filepath.Join(root, "src")
	makeSource(t, src, size, 128<<10)
	// The older copy: the source as it was, head 2 and snapshots s1, s2.
	old := filepath.Join(root, "old")
	_, err = Rebuild(t.Context(), src, old, nil)
	require.NoError(t, err)
	oldSHA := exportSHA(t, old)
	oldNames := fileNames(t, old)
	// The source moves on: a new snapshot s3, new data, head 3.
	r, err := replica.Open(src, nil)
	require.NoError(t, err)
	buf := coldread.AlignedBuffer(64 << 10)
	for i := range buf {
		buf[i] = byte(i*7 + 3)
	}
	_, err = r.WriteAt(buf, 256<<10)
	require.NoError(t, err)
	require.NoError(t, r.Snapshot("s3", nil))
	_, err = r.WriteAt(buf[:replica.BlockSize], 1<<20)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	srcSHA := exportSHA(t, src)
	require.NotEqual(t, oldSHA, srcSHA)

	n := 0
	fresh := func(mode string) (source, target string) {
		n++
		target = filepath.Join(root, fmt.Sprintf("dst%d", n))
		copyTree(t, old, target)
		source = src
		if mode == "add" { // AddReplica snapshots its source: use a copy
			source = filepath.Join(root, fmt.Sprintf("src%d", n))
			copyTree(t, src, source)
		}
		return source, target
	}
	// check judges the target after a kill; touched says whether the kill
	// came after the rebuild's first change to the target (nil: unknown),
	// committed whether after its commit (nil: unknown).
	check := func(t *testing.T, source, target string, touched, committed *bool, what string) {
		t.Helper()
		adopted, why := longhornAdopts(target)
		top := slices.DeleteFunc(fileNames(t, target), func(n string) bool { return n == replica.StagingDir })
		r, oerr := replica.Open(target, nil)
		if oerr == nil {
			require.NoError(t, r.Close())
			require.NoDirExists(t, filepath.Join(target, replica.StagingDir), "%s: Open keeps a committed rebuild's staging directory", what)
		}
		require.Equal(t, adopted, oerr == nil, "%s: Longhorn adopts: %v (%s); our Open: %v", what, adopted, why, oerr)
		if committed != nil && *committed {
			require.True(t, adopted, "%s: committed, but Longhorn would not open it: %s", what, why)
		}
		if adopted {
			sha := exportSHA(t, target)
			switch {
			case sha == srcSHA:
				require.True(t, committed == nil || *committed, "%s: adoptable before the commit", what)
			case sha == oldSHA:
				require.True(t, touched == nil || !*touched, "%s: the older copy is still adoptable after the rebuild touched it", what)
				require.ElementsMatch(t, oldNames, top, "%s: the older copy is adoptable but not as it was", what)
			default:
				t.Fatalf("%s: Longhorn would adopt a directory that holds neither the source's content nor the older copy's (%s)", what, why)
			}
		} else {
			require.ErrorIs(t, oerr, replica.ErrRebuilding, "%s", what)
			rep, err := replica.Check([]string{source, target}, nil)
			require.NoError(t, err)
			require.Equal(t, []string{source}, rep.RW, "%s: the start check takes the target", what)
		}
		// The next rebuild completes it and leaves no staging directory.
		_, err := Rebuild(t.Context(), source, target, nil)
		require.NoError(t, err, what)
		require.Equal(t, srcSHA, exportSHA(t, target), what)
		requireSameReplica(t, source, target)
		names := fileNames(t, target)
		require.NotContains(t, names, replica.StagingDir, what)
		srcNames := fileNames(t, source)
		for _, n := range names {
			require.Contains(t, srcNames, n, "%s: leftover %s", what, n)
		}
	}
	run := func(t *testing.T, spec stageChildSpec) (finished bool) {
		t.Helper()
		raw, _ := json.Marshal(spec)
		cmd := exec.Command(exe, "-test.run=^TestRebuildStageChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), stageChildEnv+"="+string(raw))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		if !spec.Slow {
			err := cmd.Wait()
			state, _ := os.ReadFile(spec.Ready)
			if spec.KillAt >= 0 {
				ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
				require.True(t, ws.Signaled(), "child was not killed (%v): %s", err, out.String())
			}
			return string(state) == "D"
		}
		for deadline := time.Now().Add(childWait); ; time.Sleep(time.Millisecond) {
			if _, err := os.Stat(spec.Ready); err == nil {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("child never started: %s", out.String())
			}
		}
		time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		state, _ := os.ReadFile(spec.Ready)
		return string(state) == "D"
	}

	for _, mode := range []string{"local", "tcp", "add"} {
		t.Run(mode, func(t *testing.T) {
			// The steps of this rebuild, in order, from a run that is not killed.
			var steps []step
			source, target := fresh(mode)
			require.NoError(t, runStaged(t, mode, source, target, func(s, name string) error {
				steps = append(steps, step{s, name})
				return nil
			}))
			firstTouch := slices.IndexFunc(steps, func(s step) bool { return s.Step == "demote" })
			commit := slices.IndexFunc(steps, func(s step) bool { return s.Step == "committed" })
			require.True(t, firstTouch >= 0 && commit > firstTouch, "steps: %v", steps)
			t.Logf("%d steps; first change to the target at %d, commit at %d", len(steps), firstTouch, commit)
			for k, s := range steps {
				source, target := fresh(mode)
				run(t, stageChildSpec{Source: source, Target: target, Ready: target + ".ready", Mode: mode, KillAt: k})
				touched, committed := k >= firstTouch, k >= commit
				check(t, source, target, &touched, &committed, fmt.Sprintf("killed in step %d %v", k, s))
			}
			for rep := range 6 {
				source, target := fresh(mode)
				finished := run(t, stageChildSpec{Source: source, Target: target, Ready: target + ".ready", Mode: mode, KillAt: -1, Slow: true})
				var committed *bool
				if finished {
					committed = &finished
				}
				t.Logf("random kill %d: finished %v", rep, finished)
				check(t, source, target, nil, committed, fmt.Sprintf("random kill %d (finished %v)", rep, finished))
			}
		})
	}
}

// childWait bounds how long a test waits for its child to start. It is long
// because only a broken child waits it out, and a machine at ten times the
// load it can carry takes seconds to start one.
const childWait = time.Minute
