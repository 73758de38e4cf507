package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// globalOpts carries what every subcommand shares: where output goes.
// Tests build one with buffers and call run<Name> in-process.
type globalOpts struct {
	stdout io.Writer
	stderr io.Writer
}

// subcommands lists the constructors of every subcommand, one per cmd_<name>.go file.
var subcommands = []func(*globalOpts) *cobra.Command{
	newExtentsCommand,
	newBalanceCommand,
	newSqueezeCommand,
	newPlanCommand,
	newServeCommand,
	newPushCommand,
	newPullCommand,
	newReplicaCommand,
	newLocalCommand,
	newDemoCommand,
	newBenchCommand,
}

const exitCodesHelp = `
Exit status:
  0    success
  1    the operation failed (the error line names the file and the cause)
  2    bad usage (unknown flag, wrong number of arguments)
  130  interrupted (SIGINT or SIGTERM)
`

func newRootCommand(g *globalOpts) *cobra.Command {
	root := &cobra.Command{
		Use:           "sparsesync",
		Short:         "Copy and synchronise sparse files exactly and fast",
		Long:          "sparsesync moves sparse disk images (storage replicas, VM disks) exactly: every byte and every hole.\n" + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	for _, newCmd := range subcommands {
		c := newCmd(g)
		if c.Args != nil {
			c.Args = wrapArgs(c.Args)
		}
		root.AddCommand(c)
	}
	return root
}

// usageError marks an error as the user's invocation being wrong (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func wrapArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// isTerminal reports whether w is a terminal that can draw (not TERM=dumb).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false
	}
	t := os.Getenv("TERM")
	return t != "" && t != "dumb"
}

// terminalWidth returns the width of w if it is a terminal, else def.
func terminalWidth(w io.Writer, def int) int {
	if f, ok := w.(*os.File); ok {
		if width, _, err := term.GetSize(int(f.Fd())); err == nil && width > 0 {
			return width
		}
	}
	return def
}
