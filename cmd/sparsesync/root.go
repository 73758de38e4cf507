package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// globalOpts carries what every subcommand shares: where output goes.
// Tests build one with buffers and call run<Name> in-process.
type globalOpts struct {
	stdout io.Writer
	stderr io.Writer
	// progressDelay, if set, replaces the commands' quiet time before a
	// progress bar appears (tests: 0, to see the bar of a quick operation).
	progressDelay *time.Duration
}

// delay is def unless the options override it.
func (g *globalOpts) delay(def time.Duration) time.Duration {
	if g.progressDelay != nil {
		return *g.progressDelay
	}
	return def
}

// subcommand is one entry of the command tree: its name (the first word of
// its Use) and its constructor, from its cmd_<name>.go file. tree marks a
// command that reads the whole tree when it runs (man renders every page).
type subcommand struct {
	name string
	new  func(*globalOpts) *cobra.Command
	tree bool
}

// subcommands lists every subcommand. TestSubcommandNames checks each name
// against what its constructor builds.
var subcommands = []subcommand{
	{"extents", newExtentsCommand, false},
	{"balance", newBalanceCommand, false},
	{"squeeze", newSqueezeCommand, false},
	{"plan", newPlanCommand, false},
	{"serve", newServeCommand, false},
	{"push", newPushCommand, false},
	{"pull", newPullCommand, false},
	{"replica", newReplicaCommand, false},
	{"local", newLocalCommand, false},
	{"demo", newDemoCommand, false},
	{"disks", newDisksCommand, false},
	{"version", newVersionCommand, false},
	{"bench", newBenchCommand, false},
	{"man", newManCommand, true},
}

const exitCodesHelp = `
Exit status:
  0    success
  1    the operation failed (the error line names the file and the cause)
  2    bad usage (unknown command or flag, missing subcommand, argument or
       required flag, a value out of range)
  130  interrupted (SIGINT or SIGTERM; "interrupted" on stderr)
With --json an error is also one object {"error", "exit_code"} on stdout.
`

// newRootCommand builds the whole command tree.
func newRootCommand(g *globalOpts) *cobra.Command {
	return newRoot(g, subcommands, true)
}

// newRootFor builds the tree that the command line args needs: when its
// first word names a subcommand, the root with that one subcommand alone
// (a command's flags, help and errors never involve its siblings), so a
// run pays for building one command rather than every one; otherwise (a
// flag, help, completion, an unknown word, nothing) the whole tree.
func newRootFor(g *globalOpts, args []string) *cobra.Command {
	if len(args) > 0 {
		for _, s := range subcommands {
			if s.name == args[0] && !s.tree {
				return newRoot(g, []subcommand{s}, false)
			}
		}
	}
	return newRootCommand(g)
}

// newRoot builds the root command with subs beneath it; whole says that
// subs is every subcommand, so the root can be run itself (--version, and
// the usage errors that list the commands).
func newRoot(g *globalOpts, subs []subcommand, whole bool) *cobra.Command {
	root := &cobra.Command{
		Use:           "sparsesync",
		Short:         "Copy and synchronise sparse files exactly and fast",
		Long:          "sparsesync moves sparse disk images (storage replicas, VM disks) exactly: every byte and every hole.\n" + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%s%w", commandName(cmd), err)}
	})
	if whole {
		// Only the root has --version, and only a run of the root itself
		// reads it (the build information costs a parse of the binary's).
		root.Version = versionString()
		root.SetVersionTemplate("{{.Version}}\n")
	}
	for _, s := range subs {
		root.AddCommand(s.new(g))
	}
	// Cobra adds "completion" and "help" only when it executes, after
	// enforceUsage would have run: add them now so they keep the contract
	// too ("completion" alone or with an unknown shell, "help bogus": 2).
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			strictHelp(c)
		}
	}
	enforceUsage(root)
	return root
}

// strictHelp makes `help TOPIC` fail with a usage error when TOPIC names no
// command (cobra prints "Unknown help topic" and succeeds).
func strictHelp(help *cobra.Command) {
	show := help.Run
	help.RunE = func(cmd *cobra.Command, args []string) error {
		if found, rest, err := cmd.Root().Find(args); found == nil || err != nil || len(rest) > 0 {
			return usageError{fmt.Errorf("no help topic %q (see %s --help)", strings.Join(args, " "), cmd.Root().Name())}
		}
		show(cmd, args)
		return nil
	}
}

// enforceUsage makes every way of calling a command wrongly a usageError
// (exit status 2), for c and all commands beneath it: wrong arguments, an
// unknown subcommand, a missing subcommand, a required flag not given.
// Cobra reports the last three as plain errors (or, for a group without a
// subcommand, prints the help and succeeds).
func enforceUsage(c *cobra.Command) {
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q for %q (see %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath())}
			}
			names := []string{}
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() {
					names = append(names, sub.Name())
				}
			}
			return usageError{fmt.Errorf("missing command after %q (one of %s)", cmd.CommandPath(), strings.Join(names, ", "))}
		}
	}
	check := c.Args
	if check == nil {
		check = cobra.ArbitraryArgs
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err} // exactArgs and minArgs name the command
		}
		return requiredFlags(cmd)
	}
	for _, sub := range c.Commands() {
		enforceUsage(sub)
	}
}

// requiredFlags checks the flags marked required (cobra checks them too,
// later, but without a type the exit status could come from).
func requiredFlags(cmd *cobra.Command) error {
	var missing []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if v, ok := f.Annotations[cobra.BashCompOneRequiredFlag]; ok && len(v) > 0 && v[0] == "true" && !f.Changed {
			missing = append(missing, "--"+f.Name)
		}
	})
	if len(missing) > 0 {
		return usageError{fmt.Errorf("%s: required flag %s not given", strings.TrimPrefix(cmd.CommandPath(), "sparsesync "), strings.Join(missing, ", "))}
	}
	return nil
}

// usageError marks an error as the user's invocation being wrong (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// isTerminal reports whether w is a terminal that can draw (not TERM=dumb).
func isTerminal(w io.Writer) bool {
	f, ok := osFile(w)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false
	}
	t := os.Getenv("TERM")
	return t != "" && t != "dumb"
}

// terminalWidth returns the width of w if it is a terminal, else def.
func terminalWidth(w io.Writer, def int) int {
	if f, ok := osFile(w); ok {
		if width, _, err := term.GetSize(int(f.Fd())); err == nil && width > 0 {
			return width
		}
	}
	return def
}

// osFile is the file beneath w: w itself, or the file a countingWriter
// (what commands get as stdout) writes to.
func osFile(w io.Writer) (*os.File, bool) {
	if c, ok := w.(*countingWriter); ok {
		w = c.w
	}
	f, ok := w.(*os.File)
	return f, ok
}
