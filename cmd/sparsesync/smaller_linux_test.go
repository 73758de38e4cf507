package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/scheduler/disks"
)

// TestLocalIntoDirectory: `local SRC DIR` copies to DIR/SRC's name, as cp
// does (it refused: "is a directory").
func TestLocalIntoDirectory(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "disk.img")
	want := randomFile(t, src, 64<<10)
	into := filepath.Join(dir, "backup")
	require.NoError(t, os.Mkdir(into, 0o755))
	out, stderr, code, _ := runCLI(t, "local", "--progress", "never", src, into)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, " -> "+filepath.Join(into, "disk.img")+":")
	got, err := os.ReadFile(filepath.Join(into, "disk.img"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))
}

// TestPushIntoRemoteDirectory: `push SRC ADDR DIR/` pushes to DIR/SRC's
// name beneath the root, as rsync does.
func TestPushIntoRemoteDirectory(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	tok := writeToken(t, dir)
	addr, _ := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", tokenFile: tok})
	src := filepath.Join(dir, "disk.img")
	want := randomFile(t, src, 64<<10)
	_, stderr, code, _ := runCLI(t, "push", "--token-file", tok, "--progress", "never", src, addr, "vm1/")
	require.Equal(t, 0, code, stderr)
	got, err := os.ReadFile(filepath.Join(root, "vm1", "disk.img"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))
}

// TestPseudoFileRefused: a /proc file (size 0, yet it reads data) copied
// as an empty file with exit 0; it is refused, naming the file, and
// nothing is made.
func TestPseudoFileRefused(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	dst := filepath.Join(t.TempDir(), "status")
	_, stderr, code, _ := runCLI(t, "local", "--progress", "never", "/proc/self/status", dst)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "/proc/self/status: not a regular file or block device (size 0 but it reads data")
	_, err := os.Stat(dst)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestDisksErrorSaysDisksOnce: the library's "disks: " prefix is not
// repeated inside the line ("disks: ... disks: another agent ...").
func TestDisksErrorSaysDisksOnce(t *testing.T) {
	err := disksErr(fmt.Errorf("disk %q: %s: %w", "d1", "/mnt/d1", disks.ErrAgentRunning))
	require.Equal(t, `sparsesync: disks: disk "d1": /mnt/d1: another agent holds the disk`, errorLine(err))
	// A sentinel first, and an error of no package: each names the
	// command once, whatever its text.
	err = disksErr(fmt.Errorf("%w: pressure percent 150 is not in 0..100", disks.ErrConfig))
	require.Equal(t, `sparsesync: disks: bad configuration: pressure percent 150 is not in 0..100`, errorLine(err))
	err = disksErr(&os.PathError{Op: "open", Path: "/mnt/d1/x", Err: os.ErrNotExist})
	require.Equal(t, `sparsesync: disks: open /mnt/d1/x: file does not exist`, errorLine(err))
}

// TestReplicaRebuildFallbackOneLine: the fallback to TCP is one line on
// stderr in the tool's own format (it was an slog level=WARN record and a
// second, plain line on stdout for the same event).
func TestReplicaRebuildFallbackOneLine(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	r, err := replica.Create(src, 1<<20, nil)
	require.NoError(t, err)
	_, err = r.WriteAt(bytes.Repeat([]byte("a"), 4096), 0)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	tok := writeToken(t, t.TempDir())
	addr, _ := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", tokenFile: tok})
	// The source is not on this machine under that path: local fails,
	// the server's root has "src".
	missing := filepath.Join(t.TempDir(), "src")
	dst := filepath.Join(t.TempDir(), "dst")
	out, stderr, code, _ := runCLI(t, "replica", "rebuild", "--remote", addr, "--token-file", tok, "--progress", "never", missing, dst)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `^sparsesync: replica rebuild: local copy failed, falling back to TCP \(source `+regexp.QuoteMeta(missing)+`, target .*\): .+\n$`, stderr)
	require.NotContains(t, stderr, "level=")
	require.Equal(t, 1, strings.Count(out, "\n"), out)
	require.Contains(t, out, "rebuilt "+dst)
}

// TestReplicaRebuildInterruptedLeavesNoEmptyTarget: a rebuild interrupted
// before it wrote anything (or out of space) left an empty target
// directory behind; a target it made is removed when empty.
func TestReplicaRebuildInterruptedLeavesNoEmptyTarget(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	r, err := replica.Create(src, 1<<20, nil)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	tok := writeToken(t, t.TempDir())
	// A server that is not there: the TCP rebuild fails after the local
	// one did, whatever the library made of the target is left to us.
	dst := filepath.Join(t.TempDir(), "dst")
	_, stderr, code, _ := runCLI(t, "replica", "rebuild", "--no-local", "--remote", "127.0.0.1:1", "--token-file", tok, "--retries", "0", "--progress", "never", src, dst)
	require.Equal(t, 1, code, stderr)
	_, err = os.Lstat(dst)
	require.ErrorIs(t, err, os.ErrNotExist, "target left behind")
}
