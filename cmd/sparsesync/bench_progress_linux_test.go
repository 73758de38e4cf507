package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// cancelOnLine is stderr that cancels a context once a line containing
// want is written: a Ctrl-C at a known point of a bench session.
type cancelOnLine struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	want   string
	cancel context.CancelFunc
}

func (w *cancelOnLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.cancel()
	}
	return n, err
}

// TestBenchInterruptedKeepsFinishedCases: a bench session interrupted after
// its first case prints that case's results (stdout), keeps it in the
// --jsonl file, and says what it stopped after; before the first case it
// said what it would run, and with stderr not a terminal it printed a
// line per finished case.
func TestBenchInterruptedKeepsFinishedCases(t *testing.T) {
	t.Setenv(mainEnv, "1") // the sparsesync children bench starts are this binary
	dir := t.TempDir()
	jsonl := filepath.Join(t.TempDir(), "cases.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errOut := &cancelOnLine{want: "case 1/2 done", cancel: cancel}
	var out bytes.Buffer
	g := &globalOpts{stdout: &out, stderr: errOut}
	cmd, wrote, err := execute(ctx, g, []string{"bench", "--dir", dir, "--workload", "dense", "--scale", "0.001",
		"--scenario", "copy", "--scenario", "resync-1pct", "--peer", "none", "--runs", "1", "--jsonl", jsonl})
	code := report(ctx, g, cmd, wrote, err)
	stderr := errOut.buf.String()
	require.Equal(t, 130, code, stderr)
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	require.Contains(t, lines[0], "sparsesync: bench: 2 cases (workloads 1 x scenarios 2 x places 1), 1 rounds")
	require.Contains(t, stderr, "sparsesync: bench: case 1/2 done: dense copy on "+dir)
	require.Equal(t, "sparsesync: bench: interrupted; stopped after 1 of 2 cases (their results printed above)", lines[len(lines)-1])
	require.Contains(t, out.String(), "dense")
	require.NotContains(t, out.String(), "resync-1pct")
	f, err := os.Open(jsonl)
	require.NoError(t, err)
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
		require.Contains(t, sc.Text(), `"dense"`)
	}
	require.Equal(t, 1, n, "cases in --jsonl")
}

// TestBenchTreeTooBigRefusedFirst: a --tree that cannot fit in the
// vm-image at this --scale is refused before anything runs (it failed in
// mkfs.ext4 -d after minutes), exit 2, naming the tree.
func TestBenchTreeTooBigRefusedFirst(t *testing.T) {
	tree := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(tree, "big"), bytes.Repeat([]byte{1}, 3<<20), 0o644))
	dir := t.TempDir()
	_, stderr, code, _ := runCLI(t, "bench", "--dir", dir, "--workload", "vm-image", "--scale", "0.001", "--tree", tree)
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "tree too big for the vm-image workload: "+tree)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents, "bench wrote into --dir")
}
