package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// leafCommands lists every command a user can run ("replica create",
// "completion bash", "help"; not the groups, which enforceUsage makes
// runnable only to refuse them), read from the command tree itself, so that a
// command added later without a row below fails TestExitStatusEveryCommand.
func leafCommands() []string {
	var paths []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden {
				continue
			}
			if sub.Runnable() && !sub.HasAvailableSubCommands() {
				paths = append(paths, strings.TrimPrefix(sub.CommandPath(), "sparsesync "))
			}
			walk(sub)
		}
	}
	walk(newRootCommand(&globalOpts{stdout: &strings.Builder{}, stderr: &strings.Builder{}}))
	slices.Sort(paths)
	return paths
}

// TestExitStatusEveryCommand holds every command to the exit status
// contract: an unknown flag, a bad flag value and a missing argument or
// required flag exit 2, an interruption (a cancelled context: main cancels
// it on SIGINT and SIGTERM; TestSignalsExit130 sends real signals) exits
// 130, each with exactly one line on stderr. Groups ("replica", "plan",
// "completion") are in TestExitStatusContract.
func TestExitStatusEveryCommand(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.img")
	sparseFile(t, src, 1<<20, map[int64]string{0: "a"})
	rep := filepath.Join(dir, "rep")
	_, stderr, code, _ := runCLI(t, "replica", "create", "--size", "1M", rep)
	require.Equal(t, 0, code, stderr)
	state := writeState(t, "state.json", planState)
	ganeti := ganetiTestdata + "hbal-migration-1.data"
	d1, d2 := filepath.Join(dir, "d1"), filepath.Join(dir, "d2")
	require.NoError(t, os.Mkdir(d1, 0o755))
	require.NoError(t, os.Mkdir(d2, 0o755))
	tok := writeToken(t, dir)
	n := func(s string) string { return filepath.Join(dir, s) }

	type row struct {
		run      []string // a valid invocation (interrupted before or while it runs)
		badValue []string // nil: the command has no flag taking a value
		missing  []string // a missing argument or required flag; nil: none needed
	}
	rows := map[string]row{
		"balance": {[]string{"balance", "-t", ganeti}, []string{"balance", "-t", ganeti, "--max-length", "many"}, []string{"balance"}},
		"bench": {[]string{"bench", "--dir", n(""), "--peer", "none", "--runs", "1"},
			[]string{"bench", "--dir", dir, "--runs", "often"}, nil},
		"demo": {[]string{"demo", "--dir", dir}, nil, nil},
		"disks": {[]string{"disks", "--disk", "d1=" + d1 + ",allow-root-fs", "--disk", "d2=" + d2 + ",allow-root-fs", "--interval", "1m"},
			[]string{"disks", "--disk", "d1=" + d1 + ",allow-root-fs", "--disk", "d2=" + d2 + ",allow-root-fs", "--interval", "soon"},
			[]string{"disks"}},
		"extents":               {[]string{"extents", src}, []string{"extents", "--map", "sometimes", src}, []string{"extents"}},
		"local":                 {[]string{"local", src, n("dst")}, []string{"local", "--method", "teleport", src, n("dst")}, []string{"local", src}},
		"plan cpu":              {[]string{"plan", "cpu", "--state", state}, []string{"plan", "cpu", "--state", state, "--now", "yesterday"}, []string{"plan", "cpu"}},
		"plan place":            {[]string{"plan", "place", "--state", state}, []string{"plan", "place", "--state", state, "--now", "yesterday"}, []string{"plan", "place"}},
		"plan rebalance":        {[]string{"plan", "rebalance", "--state", state}, []string{"plan", "rebalance", "--state", state, "--now", "yesterday"}, []string{"plan", "rebalance"}},
		"pull":                  {[]string{"pull", "--no-auth", "127.0.0.1:1", "x", n("pulled")}, []string{"pull", "--no-auth", "--retries", "some", "127.0.0.1:1", "x", n("pulled")}, []string{"pull", "127.0.0.1:1", "x"}},
		"push":                  {[]string{"push", "--no-auth", src, "127.0.0.1:1", "x"}, []string{"push", "--no-auth", "--block-size", "big", src, "127.0.0.1:1", "x"}, []string{"push", "--no-auth", src, "127.0.0.1:1"}},
		"replica bench":         {[]string{"replica", "bench", "--size", "16M", "--seconds", "60", n("bench")}, []string{"replica", "bench", "--qd", "deep", n("bench")}, []string{"replica", "bench"}},
		"replica check":         {[]string{"replica", "check", rep}, []string{"replica", "check", "--revision-counter", "maybe", rep}, []string{"replica", "check"}},
		"replica create":        {[]string{"replica", "create", "--size", "1M", n("rep-new")}, []string{"replica", "create", "--size", "lots", n("rep-new")}, []string{"replica", "create", n("rep-new")}},
		"replica export":        {[]string{"replica", "export", rep, n("vol.img")}, []string{"replica", "export", "--progress", "sometimes", rep, n("vol.img")}, []string{"replica", "export", rep}},
		"replica info":          {[]string{"replica", "info", rep}, nil, []string{"replica", "info"}},
		"replica rebuild":       {[]string{"replica", "rebuild", rep, n("rep2")}, []string{"replica", "rebuild", "--retries", "some", rep, n("rep2")}, []string{"replica", "rebuild", rep}},
		"serve":                 {[]string{"serve", "--root", dir, "--token-file", tok, "--listen", "127.0.0.1:0"}, []string{"serve", "--root", dir, "--token-file", tok, "--listen", "nonsense"}, []string{"serve", "--token-file", tok}},
		"squeeze":               {[]string{"squeeze", "-t", ganeti}, []string{"squeeze", "-t", ganeti, "--target-resources", "lots"}, []string{"squeeze"}},
		"version":               {[]string{"version"}, nil, nil},
		"man":                   {[]string{"man", dir}, nil, []string{"man"}},
		"help":                  {[]string{"help", "local"}, nil, nil},
		"completion bash":       {[]string{"completion", "bash"}, nil, nil},
		"completion fish":       {[]string{"completion", "fish"}, nil, nil},
		"completion zsh":        {[]string{"completion", "zsh"}, nil, nil},
		"completion powershell": {[]string{"completion", "powershell"}, nil, nil},
	}
	leaves := leafCommands()
	for _, leaf := range leaves {
		_, ok := rows[leaf]
		require.True(t, ok, "command %q has no row: add one", leaf)
	}
	for name := range rows {
		require.Contains(t, leaves, name, "a row for %q, a command that does not exist", name)
	}

	oneLine := func(t *testing.T, args []string, want int, ctx context.Context) string {
		t.Helper()
		stdout, stderr, code, _ := runCLIContext(ctx, args...)
		require.Equal(t, want, code, "%v: stderr %q", args, stderr)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "%v: one line: %q", args, stderr)
		require.True(t, strings.HasPrefix(stderr, "sparsesync: "), stderr)
		require.NotContains(t, stderr, "canceled")
		_ = stdout
		return stderr
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, leaf := range leaves {
		r := rows[leaf]
		t.Run(leaf, func(t *testing.T) {
			oneLine(t, append(slices.Clone(r.run), "--no-such-flag"), 2, context.Background())
			if r.badValue != nil {
				oneLine(t, r.badValue, 2, context.Background())
			}
			if r.missing != nil {
				oneLine(t, r.missing, 2, context.Background())
			}
			if leaf == "serve" {
				// Its first line says where it listens, then it stops.
				_, stderr, code, _ := runCLIContext(cancelled, r.run...)
				require.Equal(t, 130, code, stderr)
				require.Regexp(t, `^sparsesync: serving .*\nsparsesync: serve: interrupted\n$`, stderr)
				return
			}
			line := oneLine(t, r.run, 130, cancelled)
			require.Equal(t, "sparsesync: "+leaf+": interrupted\n", line)
		})
	}
}
