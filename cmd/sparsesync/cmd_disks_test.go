package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/scheduler/disks"
)

// disksFixture mounts two ext4 disks and writes one replica with 2 MiB of
// data on the first.
func disksFixture(t *testing.T) (d1, d2, name string) {
	t.Helper()
	d1 = filepath.Join(loopfs.Mount(t, loopfs.Ext4, 64<<20), "r")
	d2 = filepath.Join(loopfs.Mount(t, loopfs.Ext4, 64<<20), "r")
	require.NoError(t, os.Mkdir(d1, 0o755))
	require.NoError(t, os.Mkdir(d2, 0o755))
	name = "pvc-1-0123abcd"
	r, err := replica.Create(filepath.Join(d1, name), 8<<20, nil)
	require.NoError(t, err)
	_, err = r.WriteAt(bytes.Repeat([]byte("sparsesync"), 2<<20/10), 1<<20)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	return d1, d2, name
}

func TestDisksCommandJSON(t *testing.T) {
	d1, d2, name := disksFixture(t)
	out, errOut, code, err := runCLI(t, "disks", "--disk", "d1="+d1+",reserved=1T", "--disk", "d2="+d2, "--once", "--json", "--progress", "never")
	require.NoError(t, err, errOut)
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var kinds []string
	for _, l := range lines {
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &ev), l)
		for _, k := range []string{"time", "event", "replica", "volume", "from", "to", "bytes", "seconds", "reason"} {
			require.Contains(t, ev, k, l)
		}
		require.Len(t, ev, 9, l)
		_, err := time.Parse(time.RFC3339Nano, ev["time"].(string))
		require.NoError(t, err)
		kinds = append(kinds, ev["event"].(string))
		if ev["event"] == "move-done" {
			require.Equal(t, name, ev["replica"])
			require.Equal(t, "pvc-1", ev["volume"])
			require.Equal(t, "d1", ev["from"])
			require.Equal(t, "d2", ev["to"])
			require.GreaterOrEqual(t, ev["bytes"].(float64), float64(2<<20))
		}
	}
	require.Equal(t, []string{"pressure", "move-start", "move-done", "pass"}, kinds)
	_, err = os.Stat(filepath.Join(d2, name))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(d1, name))
	require.True(t, os.IsNotExist(err))
}

func TestDisksCommandDryRunAndErrors(t *testing.T) {
	d1, d2, name := disksFixture(t)
	out, errOut, code, err := runCLI(t, "disks", "--disk", "d1="+d1+",reserved=1T", "--disk", "d2="+d2, "--dry-run")
	require.NoError(t, err, errOut)
	require.Equal(t, 0, code)
	require.Contains(t, out, "pressure     d1: ")
	require.Contains(t, out, "skip         "+name+" d1 -> d2: dry run")
	require.Contains(t, out, "pass: 1 planned, 0 moved (0 B), 0 failed, 1 skipped, 0 held; under pressure when measured: d1\n")
	_, err = os.Stat(filepath.Join(d1, name))
	require.NoError(t, err)

	// Bad configuration: one line naming the disk, exit 1, nothing moved.
	_, errOut, code, _ = runCLI(t, "disks", "--disk", "d1="+d1+",reserved=1T", "--disk", "d2="+filepath.Join(d2, "missing"), "--once")
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
	require.Equal(t, "sparsesync: disks: bad configuration: disk \"d2\": stat "+filepath.Join(d2, "missing")+": no such file or directory\n", errOut)
	_, errOut, code, _ = runCLI(t, "disks", "--disk", "d1="+d1+",reserved=1T", "--disk", "d2="+d1, "--once")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `disk "d1" and disk "d2": two names for one directory`)
	_, err = os.Stat(filepath.Join(d1, name))
	require.NoError(t, err)

	// Usage errors: exit 2.
	for _, args := range [][]string{
		{"disks", "--disk", "d1"},
		{"disks", "--disk", "d1=" + d1 + ",reserved=lots", "--disk", "d2=" + d2},
		{"disks", "--disk", "d1=" + d1 + ",fast", "--disk", "d2=" + d2},
		{"disks", "--disk", "d1=" + d1, "--disk", "d2=" + d2, "--once", "--interval", "1s"},
		{"disks", "--disk", "d1=" + d1, "--disk", "d2=" + d2, "--disk-anti-affinity", "medium"},
		{"disks", "--disk", "d1=" + d1, "--disk", "d2=" + d2, "--max-concurrent-moves", "-1"},
		{"disks"},
	} {
		_, errOut, code, _ := runCLI(t, args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
	}
}

func TestDisksConfigFile(t *testing.T) {
	d1, d2, name := disksFixture(t)
	cfg := filepath.Join(t.TempDir(), "disks.json")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`{"node": "n1", "disks": [
		{"name": "d1", "path": %q, "reserved_bytes": 1099511627776},
		{"name": "d2", "path": %q, "no_scheduling": true}], "max_concurrent_moves": 2}`, d1, d2)), 0o600))
	out, errOut, code, err := runCLI(t, "disks", "--config", cfg, "--once")
	require.NoError(t, err, errOut)
	require.Equal(t, 0, code)
	require.Contains(t, out, "pass: 0 planned", "d2 does not take replicas")
	_, err = os.Stat(filepath.Join(d1, name))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfg, []byte(`{"disks": [], "colour": "red"}`), 0o600))
	_, errOut, code, _ = runCLI(t, "disks", "--config", cfg)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, cfg+`: json: unknown field "colour"`)
}

// TestDisksMetrics runs the agent with --interval and --metrics and scrapes
// it while it runs.
func TestDisksMetrics(t *testing.T) {
	d1, d2, _ := disksFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut bytes.Buffer
	g := &globalOpts{stdout: &out, stderr: &errOut}
	opts := &disksOpts{disks: []string{"d1=" + d1 + ",reserved=1T", "d2=" + d2}, pressure: 90, antiAffinity: "soft",
		minimalAvailable: 25, overProvisioning: 100, interval: 50 * time.Millisecond, metrics: "127.0.0.1:0", progress: "never"}
	bound := make(chan string, 1)
	opts.metricsReady = func(a string) { bound <- a }
	done := make(chan error, 1)
	go func() { done <- runDisks(ctx, g, opts, func(string) bool { return false }) }()
	var addr string
	select {
	case addr = <-bound:
	case err := <-done:
		t.Fatalf("disks ended before serving metrics: %v", err)
	}
	var body string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		// After the move, d2 holds the replica and is measured so.
		if strings.Contains(body, `sparsesync_disks_disk_replicas{disk="d2"} 1`) {
			break
		}
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Contains(t, body, `sparsesync_disks_moves_total{result="done"} 1`)
	require.Contains(t, body, `sparsesync_disks_moves_total{result="failed"} 0`)
	require.Contains(t, body, `sparsesync_disks_disk_replicas{disk="d1"} 0`)
	require.Contains(t, body, `sparsesync_disks_disk_pressured{disk="d2"} 0`)
	require.Contains(t, body, "sparsesync_disks_move_seconds_count 1")
	require.Regexp(t, `sparsesync_disks_passes_total [1-9]`, body)
	// The CLI's one registry setup: the standard collectors, as serve has.
	require.Contains(t, body, "go_goroutines ")
	require.Contains(t, body, "process_start_time_seconds ")
	require.Contains(t, out.String(), "moved        pvc-1-0123abcd d1 -> d2")
}

// lockedBuffer is a bytes.Buffer the progress goroutine and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDisksProgressBar: a move-start event starts a bar fed by the move's
// progress sampler; the next event of the move stops and clears it.
func TestDisksProgressBar(t *testing.T) {
	var stdout bytes.Buffer
	var stderr lockedBuffer
	p := &disksPrinter{g: &globalOpts{stdout: &stdout, stderr: &stderr}, bars: true}
	p.event(disks.Event{Kind: disks.EventMoveStart, Replica: "pvc-1-0123abcd", From: "d1", To: "d2", Bytes: 8 << 20,
		Progress: func() (int64, int64) { return 4 << 20, 8 << 20 }})
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stderr.String(), "50%"); time.Sleep(10 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "no bar drawn: %q", stderr.String())
	}
	require.Contains(t, stderr.String(), "pvc-1-0123abcd [")
	require.Contains(t, stderr.String(), "4.0 MiB/8.0 MiB")
	p.event(disks.Event{Kind: disks.EventMoveDone, Replica: "pvc-1-0123abcd", From: "d1", To: "d2", Bytes: 8 << 20, Seconds: 1})
	require.Nil(t, p.bar)
	require.True(t, strings.HasSuffix(stderr.String(), "\r"), "bar not cleared")
	require.Contains(t, stdout.String(), "moved        pvc-1-0123abcd d1 -> d2, 8.0 MiB in 1.00 s\n")
}

// TestDisksProgressBarConcurrentMoves: with two moves running the bar sums
// them under "2 moves"; when one ends it goes back to the other's name, and
// the last end clears it.
func TestDisksProgressBarConcurrentMoves(t *testing.T) {
	var stdout bytes.Buffer
	var stderr lockedBuffer
	p := &disksPrinter{g: &globalOpts{stdout: &stdout, stderr: &stderr}, bars: true}
	waitFor := func(s string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stderr.String(), s); time.Sleep(10 * time.Millisecond) {
			require.True(t, time.Now().Before(deadline), "no %q in %q", s, stderr.String())
		}
	}
	p.event(disks.Event{Kind: disks.EventMoveStart, Replica: "pvc-1-0123abcd", From: "d1", To: "d3", Bytes: 8 << 20,
		Progress: func() (int64, int64) { return 4 << 20, 8 << 20 }})
	p.event(disks.Event{Kind: disks.EventMoveStart, Replica: "pvc-2-0123abcd", From: "d2", To: "d3", Bytes: 8 << 20,
		Progress: func() (int64, int64) { return 8 << 20, 8 << 20 }})
	waitFor("2 moves [")
	waitFor("12.0 MiB/16.0 MiB")
	p.event(disks.Event{Kind: disks.EventMoveDone, Replica: "pvc-2-0123abcd", From: "d2", To: "d3", Bytes: 8 << 20, Seconds: 1})
	require.NotNil(t, p.bar, "a move still runs")
	waitFor("pvc-1-0123abcd [")
	p.event(disks.Event{Kind: disks.EventMoveFailed, Replica: "pvc-1-0123abcd", From: "d1", To: "d3", Reason: "boom"})
	require.Nil(t, p.bar)
	require.Contains(t, stdout.String(), "moved        pvc-2-0123abcd d2 -> d3")
	require.Contains(t, stdout.String(), "failed       pvc-1-0123abcd d1 -> d3: boom")
}
