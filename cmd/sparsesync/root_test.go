package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// TestSubcommandNames: every row of subcommands names the command its
// constructor builds, and the rows cover the whole tree, so that a command
// line whose first word is a subcommand finds it in the one-command tree.
func TestSubcommandNames(t *testing.T) {
	g := &globalOpts{stdout: &strings.Builder{}, stderr: &strings.Builder{}}
	seen := map[string]bool{}
	for _, s := range subcommands {
		c := s.new(g)
		require.Equal(t, s.name, c.Name(), "subcommands row %q", s.name)
		require.Empty(t, c.Aliases, "%s: an alias would not be found by newRootFor", s.name)
		require.False(t, seen[s.name], "%s listed twice", s.name)
		seen[s.name] = true
	}
}

// TestOneCommandTree: a command line that starts with a subcommand builds
// that subcommand alone (and no --version), and one that does not (help,
// a flag, a command that renders the tree, a typo) builds all of them.
func TestOneCommandTree(t *testing.T) {
	g := &globalOpts{stdout: &strings.Builder{}, stderr: &strings.Builder{}}
	names := func(root *cobra.Command) []string {
		var n []string
		for _, c := range root.Commands() {
			if c.Name() != "help" && c.Name() != "completion" {
				n = append(n, c.Name())
			}
		}
		return n
	}
	for _, s := range subcommands {
		root := newRootFor(g, []string{s.name, "--help"})
		if s.tree {
			require.Len(t, names(root), len(subcommands), s.name)
			continue
		}
		require.Equal(t, []string{s.name}, names(root))
		require.Empty(t, root.Version)
	}
	for _, args := range [][]string{nil, {"--help"}, {"help", "local"}, {"--version"}, {"loca"}, {"completion", "bash"}, {"__complete", "lo"}} {
		root := newRootFor(g, args)
		require.Len(t, names(root), len(subcommands), "%q", args)
		require.NotEmpty(t, root.Version, "%q", args)
	}
}

// TestOneCommandTreeBehavesTheSame: every command, run through the
// one-command tree, prints the same help and the same errors, with the same
// exit status, as through the whole tree: its --help, an unknown flag, and
// (for the groups) an unknown or a missing subcommand.
func TestOneCommandTreeBehavesTheSame(t *testing.T) {
	runWith := func(build func(*globalOpts, []string) *cobra.Command, args []string) (string, string, int) {
		var out, errOut bytes.Buffer
		g := &globalOpts{stdout: &out, stderr: &errOut}
		root := build(&globalOpts{stdout: &countingWriter{w: &out}, stderr: &errOut}, args)
		root.SetArgs(args)
		cmd, err := root.ExecuteContextC(context.Background())
		code := report(context.Background(), g, cmd, out.Len() > 0, err)
		return out.String(), errOut.String(), code
	}
	whole := func(g *globalOpts, _ []string) *cobra.Command { return newRootCommand(g) }
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			p := append(append([]string{}, path...), sub.Name())
			paths = append(paths, p)
			walk(sub, p)
		}
	}
	walk(newRootCommand(&globalOpts{stdout: &strings.Builder{}, stderr: &strings.Builder{}}), nil)
	require.Greater(t, len(paths), len(subcommands))
	for _, p := range paths {
		for _, extra := range [][]string{{"--help"}, {"--no-such-flag"}, {"no-such-command"}, nil} {
			args := append(append([]string{}, p...), extra...)
			group := len(p) == 1 && (p[0] == "plan" || p[0] == "replica")
			if p[0] == "completion" || p[0] == "help" || (!group && (extra == nil || extra[0] == "no-such-command")) {
				continue // the whole tree either way; a leaf's arguments are its own (TestExitStatusEveryCommand)
			}
			wantOut, wantErr, wantCode := runWith(whole, args)
			gotOut, gotErr, gotCode := runWith(newRootFor, args)
			require.Equal(t, wantOut, gotOut, "%q: stdout", args)
			require.Equal(t, wantErr, gotErr, "%q: stderr", args)
			require.Equal(t, wantCode, gotCode, "%q: exit status", args)
		}
	}
}
