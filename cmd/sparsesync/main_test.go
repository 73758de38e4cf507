package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runCLI runs "sparsesync args..." in-process the way main does: stdout,
// stderr (ending with main's one error line on failure), the exit status main
// would use, and the error itself.
func runCLI(t testing.TB, args ...string) (stdout, stderr string, code int, err error) {
	t.Helper()
	return runCLIContext(context.Background(), args...)
}

// runCLIContext is runCLI under ctx (cancel it to play Ctrl-C).
func runCLIContext(ctx context.Context, args ...string) (stdout, stderr string, code int, err error) {
	var out, errOut bytes.Buffer
	g := &globalOpts{stdout: &out, stderr: &errOut}
	cmd, wrote, err := execute(ctx, g, args)
	code = report(ctx, g, cmd, wrote, err)
	return out.String(), errOut.String(), code, err
}

// TestExitStatusContract: every way of calling a command wrongly exits 2,
// a failure 1, success 0, an interruption 130, each with one line on
// stderr; with --json the error is also one object on stdout.
func TestExitStatusContract(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name string
		args []string
		code int
		line string // the stderr line, without "sparsesync: "
	}{
		{"unknown command", []string{"bogus"}, 2, `unknown command "bogus" for "sparsesync" (see sparsesync --help)`},
		{"unknown replica subcommand", []string{"replica", "bogus"}, 2, ""},
		{"unknown plan subcommand", []string{"plan", "bogus"}, 2, `unknown command "bogus" for "sparsesync plan" (see sparsesync plan --help)`},
		{"no command", []string{}, 2, ""},
		{"plan without subcommand", []string{"plan"}, 2, `missing command after "sparsesync plan" (one of cpu, place, rebalance)`},
		{"replica without subcommand", []string{"replica"}, 2, `missing command after "sparsesync replica" (one of bench, check, create, export, info, rebuild)`},
		{"completion without subcommand", []string{"completion"}, 2, `missing command after "sparsesync completion" (one of bash, fish, powershell, zsh)`},
		{"unknown completion shell", []string{"completion", "tcsh"}, 2, `unknown command "tcsh" for "sparsesync completion" (see sparsesync completion --help)`},
		{"help on an unknown topic", []string{"help", "bogus"}, 2, `no help topic "bogus" (see sparsesync --help)`},
		{"serve without --root", []string{"serve", "--no-auth"}, 2, "serve: required flag --root not given"},
		{"replica create without --size", []string{"replica", "create", filepath.Join(dir, "r")}, 2, "replica create: required flag --size not given"},
		{"balance without -t", []string{"balance"}, 2, "balance: required flag --text-data not given"},
		{"squeeze without -t", []string{"squeeze"}, 2, "squeeze: required flag --text-data not given"},
		{"balance with a NaN --min-gain", []string{"balance", "-t", missing, "--min-gain", "NaN"}, 2, "balance: invalid options: MinGain NaN must be a finite number"},
		{"plan rebalance with negative --max-passes", []string{"plan", "rebalance", "--state", missing, "--until-stable", "--max-passes", "-1"}, 2,
			"plan rebalance: invalid options: MaxPasses -1 is negative (0: the default, 10,000)"},
		{"unknown flag", []string{"local", "--nope", "a", "b"}, 2, "local: unknown flag: --nope"},
		{"bad --progress", []string{"local", "--progress", "sometimes", "a", "b"}, 2, `--progress: unknown value "sometimes" (want auto, always or never)`},
		{"bad --compress", []string{"push", "--no-auth", "--compress", "gzip", "a", "127.0.0.1:1", "x"}, 2, ""},
		{"bad --size", []string{"replica", "create", "--size", "lots", filepath.Join(dir, "r")}, 2, `replica create: --size: invalid size "lots"`},
		{"bad --revision-counter", []string{"replica", "check", "--revision-counter", "maybe", dir}, 2, ""},
		{"too many arguments", []string{"local", "a", "b", "c"}, 2, ""},
		{"serve --no-auth beyond loopback", []string{"serve", "--root", dir, "--no-auth", "--listen", "0.0.0.0:0"}, 2, "serve: --no-auth is only allowed on a loopback address, not 0.0.0.0:0"},
		{"serve on a malformed address", []string{"serve", "--root", dir, "--no-auth", "--listen", "7373"}, 2, `serve: --listen "7373": want host:port`},
		{"push to a port out of range", []string{"push", "--no-auth", "a", "127.0.0.1:70000", "x"}, 2, `push a to 127.0.0.1:70000 x: ADDR "127.0.0.1:70000": port out of range 0-65535`},
		{"serve on a missing root", []string{"serve", "--root", missing, "--no-auth", "--listen", "127.0.0.1:0"}, 1, "serve: --root " + missing + ": no such file or directory"},
		{"library error under the command's name", []string{"replica", "rebuild", missing, filepath.Join(dir, "rep")}, 1,
			"replica rebuild: rebuild " + filepath.Join(dir, "rep") + ": " + missing + ": not a replica directory: open " + missing + "/volume.meta: no such file or directory"},
		{"failure", []string{"local", missing, filepath.Join(dir, "out")}, 1, "local " + missing + " -> " + filepath.Join(dir, "out") + ": open " + missing + ": no such file or directory"},
		{"disks threshold out of range", []string{"disks", "--disk", "a=" + dir, "--disk", "b=" + missing, "--pressure-percent", "150", "--once"}, 2,
			"disks: bad configuration: pressure percent 150 is not in 0..100"},
		{"replica create size not in blocks", []string{"replica", "create", "--size", "1000", filepath.Join(dir, "r")}, 2,
			"replica create: --size 1000 is not a multiple of 4096"},
		{"push to a name escaping the root", []string{"push", "--no-auth", missing, "127.0.0.1:1", "../escape.img"}, 2,
			"push " + missing + " to 127.0.0.1:1 ../escape.img: bad remote path: \"../escape.img\": dot component"},
		{"version", []string{"version"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code, _ := runCLI(t, tc.args...)
			require.Equal(t, tc.code, code, stderr)
			if tc.code == 0 {
				require.Empty(t, stderr)
				return
			}
			require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			require.True(t, strings.HasPrefix(stderr, "sparsesync: "), stderr)
			require.NotContains(t, stderr, "sparsesync: sparsesync")
			if tc.line != "" {
				require.Equal(t, "sparsesync: "+tc.line+"\n", stderr)
			}
		})
	}
	require.NoDirExists(t, filepath.Join(dir, "r"))
}

// TestJSONErrors: with --json a failure is one object {error, exit_code}
// on stdout, for failures and for bad usage.
func TestJSONErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"local", "--json", missing, filepath.Join(dir, "out")}, 1},
		{[]string{"local", "--json", "--method", "teleport", missing, filepath.Join(dir, "out")}, 2},
		{[]string{"local", "--nope", "--json", missing, filepath.Join(dir, "out")}, 2}, // parsing stops before --json
		{[]string{"replica", "rebuild", "--json", missing, filepath.Join(dir, "rep")}, 1},
		{[]string{"replica", "info", "--json", missing}, 1},
		{[]string{"extents", "--json", missing}, 1},
		{[]string{"pull", "--json", "--no-auth", "127.0.0.1:1", "x", filepath.Join(dir, "out")}, 1},
	} {
		stdout, stderr, code, _ := runCLI(t, tc.args...)
		require.Equal(t, tc.code, code, stderr)
		require.Equal(t, 1, strings.Count(stdout, "\n"), "one object: %q", stdout)
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &got))
		require.Len(t, got, 2, stdout)
		require.EqualValues(t, tc.code, got["exit_code"])
		require.Equal(t, strings.TrimSuffix(strings.TrimPrefix(stderr, "sparsesync: "), "\n"), got["error"])
	}
}

// TestInterruptedEverywhere: a command whose context is cancelled (main
// cancels it on SIGINT and SIGTERM) exits 130 with "interrupted", never
// "context canceled".
func TestInterruptedEverywhere(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	sparseFile(t, src, 1<<20, map[int64]string{0: "a"})
	rep := filepath.Join(dir, "rep")
	_, stderr, code, _ := runCLI(t, "replica", "create", "--size", "1M", rep)
	require.Equal(t, 0, code, stderr)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{
		{"local", src, filepath.Join(dir, "dst")},
		{"push", "--no-auth", src, "127.0.0.1:1", "x"},
		{"pull", "--no-auth", "127.0.0.1:1", "x", filepath.Join(dir, "pulled")},
		{"extents", src},
		{"replica", "export", rep, filepath.Join(dir, "out.img")},
		{"replica", "rebuild", rep, filepath.Join(dir, "rep2")},
		{"replica", "info", rep},
		{"serve", "--root", dir, "--no-auth", "--listen", "127.0.0.1:0"},
	} {
		_, stderr, code, _ := runCLIContext(ctx, args...)
		require.Equal(t, 130, code, "%v: %s", args, stderr)
		name := args[0]
		if name == "replica" {
			name += " " + args[1]
		}
		require.True(t, strings.HasSuffix(stderr, "\nsparsesync: "+name+": interrupted\n") || stderr == "sparsesync: "+name+": interrupted\n", "%v: %q", args, stderr)
		require.NotContains(t, stderr, "canceled")
	}
	require.NoFileExists(t, filepath.Join(dir, "dst"), "an interrupted copy leaves no new destination")
}

// TestSignalsExit130 sends SIGINT and SIGTERM to a running serve and a
// running replica bench (a real process, as a user's Ctrl-C would).
func TestSignalsExit130(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary (-short)")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run("serve "+sig.String(), func(t *testing.T) {
			c := exec.Command(bin, "serve", "--root", dir, "--no-auth", "--listen", "127.0.0.1:0")
			stderr, err := c.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, c.Start())
			sc := bufio.NewScanner(stderr)
			require.True(t, sc.Scan())
			require.Regexp(t, `^sparsesync: serving .* on 127\.0\.0\.1:\d+ \(no authentication\)$`, sc.Text())
			require.NoError(t, c.Process.Signal(sig))
			require.True(t, sc.Scan())
			require.Equal(t, "sparsesync: serve: interrupted", sc.Text())
			require.Error(t, c.Wait())
			require.Equal(t, 130, c.ProcessState.ExitCode())
		})
		t.Run("bench "+sig.String(), func(t *testing.T) {
			bdir := filepath.Join(dir, "bench-"+sig.String())
			c := exec.Command(bin, "replica", "bench", "--size", "64M", "--seconds", "600", bdir)
			var errOut bytes.Buffer
			c.Stderr = &errOut
			require.NoError(t, c.Start())
			// Wait for the replica to exist (the bench is running), bounded.
			require.Eventually(t, func() bool {
				_, err := os.Stat(filepath.Join(bdir, "volume.meta"))
				return err == nil
			}, 60*time.Second, 10*time.Millisecond)
			require.NoError(t, c.Process.Signal(sig))
			require.Error(t, c.Wait())
			require.Equal(t, 130, c.ProcessState.ExitCode(), errOut.String())
			require.Equal(t, "sparsesync: replica bench: interrupted\n", errOut.String())
		})
	}
}
