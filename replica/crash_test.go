package replica

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/target"
)

// The crash tests run a Volume in a child process (this test binary,
// re-executed into TestCrashChild), kill it with SIGKILL at a random moment
// and check what the start check keeps against the child's log of issued
// and acknowledged writes.

const (
	crashChildEnv = "SPARSESYNC_REPLICA_CRASH_CHILD"
	crashBlocks   = 256 // volume blocks written by the child
	crashWorkers  = 16  // writes in flight
	crashReps     = 20
)

type crashSpec struct {
	Dirs []string
	Mode CounterMode
	Log  string
	// FailDir, if set, fails every data write to that replica once
	// FailAfter writes were issued (the Volume must demote it).
	FailDir   string
	FailAfter uint64
}

// crashPattern fills a block with data unique to (seq, blk), so a torn or
// misplaced block is detected.
func crashPattern(b []byte, seq uint64, blk int64) {
	binary.LittleEndian.PutUint64(b, seq)
	binary.LittleEndian.PutUint64(b[8:], uint64(blk))
	for i := 16; i < len(b); i++ {
		b[i] = byte(seq*31 + uint64(i)*7 + uint64(blk))
	}
}

func TestCrashChild(t *testing.T) {
	raw := os.Getenv(crashChildEnv)
	if raw == "" {
		t.Skip("helper process of the crash tests")
	}
	var spec crashSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(spec.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	var seq atomic.Uint64
	var failOnce sync.Once
	var fault *target.Faults // nil injects nothing
	if spec.FailDir != "" {
		fault = target.NewFaults(target.Fault{Op: target.OpWrite, Path: filepath.Join(spec.FailDir, "*"), When: func() bool {
			if seq.Load() < spec.FailAfter {
				return false
			}
			failOnce.Do(func() {
				if _, err := logf.Write([]byte("F\n")); err != nil {
					panic(err)
				}
			})
			return true
		}, Err: errors.New("injected write failure")})
	}
	// A plain start, as after a clean shutdown: every replica RW.
	v, err := OpenVolume(spec.Dirs, &VolumeOptions{Counter: spec.Mode, Replica: Options{faults: fault}})
	if err != nil {
		t.Fatal(err)
	}
	line := func(kind byte, s uint64, blk int64) {
		// One write(2) per line: it is in the kernel once Write returns.
		if _, err := logf.Write([]byte(fmt.Sprintf("%c %d %d\n", kind, s, blk))); err != nil {
			panic(err)
		}
	}
	if _, err := logf.Write([]byte("R\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second) // the parent kills us long before
	var wg sync.WaitGroup
	for w := range crashWorkers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			b := alignedBuf(BlockSize)
			for i := 0; time.Now().Before(deadline); i++ {
				blk := int64(rng.IntN(crashBlocks/crashWorkers)*crashWorkers + w)
				s := seq.Add(1)
				crashPattern(b, s, blk)
				line('I', s, blk)
				if _, err := v.WriteAt(b, blk*BlockSize); err != nil {
					panic(err)
				}
				line('A', s, blk)
				if i%64 == 63 {
					if err := v.Flush(); err != nil {
						panic(err)
					}
				}
			}
		})
	}
	wg.Wait()
	os.Exit(3) // not killed: the parent reports it
}

// crashLog is what the child recorded.
type crashLog struct {
	issued map[int64][]uint64 // per block, in issue order (one writer per block)
	acked  map[uint64]bool
	// ackedAfterFail: a write issued after the injected failure was
	// logged was acknowledged. Its write to the failing replica failed
	// (every write that reaches it after the failure does), so that
	// replica misses acknowledged data. A write issued before the failure
	// and acknowledged after it proves nothing: it may have reached the
	// failing replica in time (seen under load: its "A" line came after
	// the "F" of another worker's write, killed before its demotion).
	failed, ackedAfterFail bool
	issuedAfterFail        map[uint64]bool
}

func readCrashLog(t *testing.T, path string) (crashLog, bool) {
	l := crashLog{issued: map[int64][]uint64{}, acked: map[uint64]bool{}, issuedAfterFail: map[uint64]bool{}}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	ready := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kind string
		var s uint64
		var blk int64
		switch sc.Text() {
		case "R":
			ready = true
			continue
		case "F":
			l.failed = true
			continue
		}
		if n, _ := fmt.Sscanf(sc.Text(), "%s %d %d", &kind, &s, &blk); n != 3 {
			continue
		}
		if kind == "I" {
			l.issued[blk] = append(l.issued[blk], s)
			if l.failed {
				l.issuedAfterFail[s] = true
			}
		} else {
			l.acked[s] = true
			l.ackedAfterFail = l.ackedAfterFail || l.issuedAfterFail[s]
		}
	}
	return l, ready
}

// verifyCrash checks that every block of the replica in dir holds its last
// acknowledged pattern or a pattern issued after it (a write in flight at
// the kill), and nothing torn.
func verifyCrash(t *testing.T, dir string, l crashLog) {
	t.Helper()
	r, err := Open(dir, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	got := make([]byte, crashBlocks*BlockSize)
	_, err = r.ReadAt(got, 0)
	require.NoError(t, err)
	want := make([]byte, BlockSize)
	for blk := range int64(crashBlocks) {
		b := got[blk*BlockSize : (blk+1)*BlockSize]
		var lastAcked uint64
		for _, s := range l.issued[blk] {
			if l.acked[s] {
				lastAcked = s
			}
		}
		s := binary.LittleEndian.Uint64(b)
		if s == 0 {
			require.Zero(t, lastAcked, "%s block %d: hole, but write %d was acknowledged", dir, blk, lastAcked)
			require.True(t, bytes.Equal(b, make([]byte, BlockSize)), "%s block %d: torn", dir, blk)
			continue
		}
		crashPattern(want, s, blk)
		require.True(t, bytes.Equal(b, want), "%s block %d: not the pattern of write %d (torn or misplaced)", dir, blk, s)
		ok := s == lastAcked
		for _, is := range l.issued[blk] {
			ok = ok || is == s && s > lastAcked
		}
		require.True(t, ok, "%s block %d: holds write %d, last acknowledged is %d", dir, blk, s, lastAcked)
	}
}

func runCrash(t *testing.T, mode CounterMode) {
	if testing.Short() {
		t.Skip("crash tests re-exec the test binary")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	erred, acked, demoted := 0, 0, 0
	for rep := range crashReps {
		root := t.TempDir()
		dirs := []string{filepath.Join(root, "r0"), filepath.Join(root, "r1"), filepath.Join(root, "r2")}
		v, err := CreateVolume(dirs, 4<<20, &VolumeOptions{Counter: mode})
		require.NoError(t, err)
		require.NoError(t, v.Close())
		cs := crashSpec{Dirs: dirs, Mode: mode, Log: filepath.Join(root, "log")}
		if rep%2 == 1 { // every other kill: replica r1 fails on the way
			cs.FailDir, cs.FailAfter = dirs[1], uint64(100+rng.IntN(1000))
		}
		spec, _ := json.Marshal(cs)
		cmd := exec.Command(exe, "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+string(spec))
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		require.NoError(t, cmd.Start())
		// Wait until the child writes, then let it run 10-150 ms.
		var l crashLog
		ready := false
		for deadline := time.Now().Add(childWait); !ready && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
			if _, err := os.Stat(filepath.Join(root, "log")); err == nil {
				_, ready = readCrashLog(t, filepath.Join(root, "log"))
			}
		}
		if !ready {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("rep %d: child never became ready: %s", rep, stderr.String())
		}
		// On a loaded machine the first acknowledgement can take longer than
		// the random delay below: wait for one so every kill tests something.
		for deadline := time.Now().Add(childWait); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if l, _ = readCrashLog(t, filepath.Join(root, "log")); len(l.acked) > 0 {
				break
			}
		}
		time.Sleep(time.Duration(10+rng.IntN(140)) * time.Millisecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		err = cmd.Wait()
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "rep %d: child was not killed (%v): %s", rep, err, stderr.String())
		l, _ = readCrashLog(t, filepath.Join(root, "log"))
		require.NotEmpty(t, l.acked, "rep %d: no write acknowledged before the kill", rep)
		acked += len(l.acked)

		enabled := mode.Enabled()
		rpt, err := Check(dirs, &CheckOptions{Counter: &enabled, Salvage: !enabled})
		require.NoError(t, err)
		if enabled {
			require.NotEmpty(t, rpt.RW)
		} else {
			require.Len(t, rpt.RW, 1, "salvage keeps exactly one replica")
		}
		erred += len(dirs) - len(rpt.RW)
		if l.ackedAfterFail {
			demoted++
			require.NotContains(t, rpt.RW, dirs[1], "rep %d: r1 missed acknowledged writes but is RW", rep)
		}
		for _, d := range rpt.RW {
			verifyCrash(t, d, l)
		}
		// The volume opens on what the check kept.
		v, err = OpenVolume(dirs, &VolumeOptions{Counter: mode, Salvage: !enabled})
		require.NoError(t, err)
		require.NoError(t, v.Close())
		if t.Failed() {
			t.Logf("rep %d report: %+v", rep, rpt)
			return
		}
	}
	t.Logf("%d kills, %d acknowledged writes checked, %d replicas ERR after the check, %d runs with r1 demoted before the kill",
		crashReps, acked, erred, demoted)
}

func TestCrashCounterOn(t *testing.T)         { runCrash(t, CounterOn) }
func TestCrashCounterOffSalvage(t *testing.T) { runCrash(t, CounterOff) }

// childWait bounds how long a crash test waits for its child to start
// writing. It is long because only a broken child waits it out, and a
// machine at ten times the load it can carry takes seconds to start one.
const childWait = time.Minute
