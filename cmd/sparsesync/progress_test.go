package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func checkBarThenLine(t *testing.T, out, label, result string) {
	t.Helper()
	first := strings.Index(out, "\r"+label+" ")
	require.GreaterOrEqual(t, first, 0, "the bar appeared: %q", out)
	clear := "\r" + strings.Repeat(" ", 99) + "\r"
	last := strings.LastIndex(out, clear)
	require.Greater(t, last, first, "the bar was cleared: %q", out)
	if result == "" {
		require.Equal(t, len(out), last+len(clear), "nothing after clearing: %q", out)
		return
	}
	rest := out[last+len(clear):]
	require.True(t, strings.HasPrefix(rest, result), "the result follows the cleared bar: %q", rest)
	require.NotContains(t, rest, "\r", "nothing of the bar after the result: %q", rest)
	require.True(t, strings.HasSuffix(rest, "\n"), "the result ends its line: %q", rest)
}

func noDelay() *time.Duration { d := time.Duration(0); return &d }

// TestProgressOnTerminal runs local, replica export, rebuild and bench on
// a pseudo-terminal (stdout and stderr both on it, as in a shell) and
// checks the bar appears, is cleared, and the result line stands alone.
func TestProgressOnTerminal(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	sparseFile(t, src, 8<<20, map[int64]string{0: "a", 4 << 20: "b"})
	rep := filepath.Join(dir, "rep")
	_, stderr, code, _ := runCLI(t, "replica", "create", "--size", "8M", rep)
	require.Equal(t, 0, code, stderr)

	run := func(args ...string) string {
		tty, output := openPTY(t)
		g := &globalOpts{stdout: tty, stderr: tty, progressDelay: noDelay()}
		cmd, wrote, err := execute(t.Context(), g, args)
		require.Equal(t, 0, report(t.Context(), g, cmd, wrote, err), "%v: %v", args, err)
		return output()
	}
	checkBarThenLine(t, run("local", src, filepath.Join(dir, "dst")), "local", src+" -> "+filepath.Join(dir, "dst")+": size 8.0 MiB")
	checkBarThenLine(t, run("local", "--json", src, filepath.Join(dir, "dst2")), "local", `{"src":`)
	checkBarThenLine(t, run("replica", "export", rep, filepath.Join(dir, "vol.img")), "export", "exported "+rep)
	checkBarThenLine(t, run("replica", "rebuild", rep, filepath.Join(dir, "rep2")), "rebuild", "rebuilt "+filepath.Join(dir, "rep2"))
	out := run("replica", "bench", "--size", "16M", "--seconds", "0.2", filepath.Join(dir, "bench"))
	checkBarThenLine(t, out, "bench fill", "random 4 KiB writes")

	// --progress never, and auto on a non-terminal: nothing on stderr.
	tty, output := openPTY(t)
	g := &globalOpts{stdout: &bytes.Buffer{}, stderr: tty, progressDelay: noDelay()}
	cmd, wrote, err := execute(t.Context(), g, []string{"local", "--progress", "never", src, filepath.Join(dir, "dst3")})
	require.Equal(t, 0, report(t.Context(), g, cmd, wrote, err))
	require.Empty(t, output())
	var outBuf, errBuf bytes.Buffer
	g = &globalOpts{stdout: &outBuf, stderr: &errBuf, progressDelay: noDelay()}
	cmd, wrote, err = execute(t.Context(), g, []string{"replica", "export", rep, filepath.Join(dir, "vol2.img")})
	require.Equal(t, 0, report(t.Context(), g, cmd, wrote, err))
	require.Empty(t, errBuf.String())
	require.NotContains(t, outBuf.String(), "\r")
}

// TestProgressNeverOnStdout: --progress always with stdout a pipe and
// stderr a buffer: the bar goes to stderr only.
func TestProgressNeverOnStdout(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	sparseFile(t, src, 8<<20, map[int64]string{0: "a"})
	var outBuf, errBuf bytes.Buffer
	g := &globalOpts{stdout: &outBuf, stderr: &errBuf, progressDelay: noDelay()}
	cmd, wrote, err := execute(t.Context(), g, []string{"local", "--progress", "always", src, filepath.Join(dir, "dst")})
	require.Equal(t, 0, report(t.Context(), g, cmd, wrote, err))
	require.Contains(t, errBuf.String(), "\rlocal ")
	require.NotContains(t, outBuf.String(), "\r")
	require.Equal(t, 1, strings.Count(outBuf.String(), "\n"))
}

// TestExtentsMapOnTerminal: extents draws its one-line map when stdout is a
// terminal (--map auto), as the README's example shows, and not on a pipe.
func TestExtentsMapOnTerminal(t *testing.T) {
	src := filepath.Join(t.TempDir(), "disk.img")
	sparseFile(t, src, 1<<30, map[int64]string{300 << 20: "hello"})
	tty, output := openPTY(t)
	g := &globalOpts{stdout: tty, stderr: tty}
	cmd, wrote, err := execute(t.Context(), g, []string{"extents", src})
	require.Equal(t, 0, report(t.Context(), g, cmd, wrote, err), "%v", err)
	require.Regexp(t, `(?m)^\[\.+\+\.+\]$`, output())

	var out bytes.Buffer
	g = &globalOpts{stdout: &out, stderr: &bytes.Buffer{}}
	cmd, wrote, err = execute(t.Context(), g, []string{"extents", src})
	require.Equal(t, 0, report(t.Context(), g, cmd, wrote, err))
	require.NotContains(t, out.String(), "[.")
}

// TestProgressCounterFeedsBar: a library's callback (localsync's
// Progress) reaches the bar through the same sampled counters as
// tcpsync's; done never moves backwards.
func TestProgressCounterFeedsBar(t *testing.T) {
	var c progressCounter
	c.update(1<<20, 4<<20)
	c.update(512<<10, 4<<20) // a late, smaller report
	done, total, _ := c.sample()
	require.Equal(t, int64(1<<20), done)
	require.Equal(t, int64(4<<20), total)
	var buf lockedBuffer
	bar := startProgress(&buf, "local", 80, 0, c.sample)
	bar.Stop()
	require.Contains(t, buf.String(), "local [")
	require.Contains(t, buf.String(), " 25% 1.0 MiB/4.0 MiB")
}
