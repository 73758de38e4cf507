package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sparsesync/sparsesync/internal/errtext"
)

// run executes "sparsesync args..." and reports the way main does: the
// error as one line on stderr (and, with --json, as one JSON object on
// stdout), and returns the exit status.
func run(ctx context.Context, g *globalOpts, args []string) int {
	cmd, wrote, err := execute(ctx, g, args)
	return report(ctx, g, cmd, wrote, err)
}

// execute runs the command line and returns the command it ran and
// whether that wrote to stdout.
func execute(ctx context.Context, g *globalOpts, args []string) (*cobra.Command, bool, error) {
	out := &countingWriter{w: g.stdout}
	root := newRootFor(&globalOpts{stdout: out, stderr: g.stderr, progressDelay: g.progressDelay}, args)
	root.SetArgs(args)
	interruptedBefore := ctx.Err() != nil
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil && interruptedBefore {
		// Interrupted before it ran (a command that never looks at ctx,
		// such as version, still counts as interrupted); one interrupted
		// after it finished its work succeeded (exitCode).
		err = ctx.Err()
	}
	if err != nil && cmd != nil && !jsonRequested(cmd) && slices.ContainsFunc(beforeDashes(args), isJSONFlag) {
		// Parsing stopped at a bad flag before reaching --json: the user
		// still asked for a JSON error.
		if f := cmd.Flags().Lookup("json"); f != nil {
			_ = f.Value.Set("true")
		}
	}
	return cmd, out.n > 0, err
}

// beforeDashes is args up to a "--" (after it, nothing is a flag).
func beforeDashes(args []string) []string {
	if i := slices.Index(args, "--"); i >= 0 {
		return args[:i]
	}
	return args
}

func isJSONFlag(arg string) bool { return arg == "--json" || arg == "--json=true" }

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// report prints err (if any) as the user sees it and returns the exit
// status. With --json the error is also one JSON object on stdout, unless
// the command already printed its own object there (a result that
// carries its errors, as plan cpu and replica check do).
func report(ctx context.Context, g *globalOpts, cmd *cobra.Command, wroteStdout bool, err error) int {
	code := exitCode(ctx, err)
	if code == 0 {
		return 0
	}
	var line string
	if code == 130 {
		line = "sparsesync: " + commandName(cmd) + "interrupted"
		var n noter
		if errors.As(err, &n) {
			line += "; " + n.note()
		}
	} else {
		var unnamed bool
		line, unnamed = renderError(err)
		if unnamed && commandName(cmd) != "" {
			// A library sentinel returned as is ("directory is open by
			// another writer: ..."): the line names the command first.
			line = "sparsesync: " + commandName(cmd) + strings.TrimPrefix(line, "sparsesync: ")
		}
	}
	g.stderrLine(line)
	if cmd != nil && jsonRequested(cmd) && !wroteStdout {
		_ = writeJSONLine(g.stdout, struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
		}{strings.TrimPrefix(line, "sparsesync: "), code})
	}
	return code
}

// noter is an error with a note that an interrupted command's line keeps
// (which is otherwise just "interrupted"): what it left behind.
type noter interface{ note() string }

// commandName is "push: " for `sparsesync push`, "" for the root.
func commandName(cmd *cobra.Command) string {
	if cmd == nil || !cmd.HasParent() {
		return ""
	}
	return strings.TrimPrefix(cmd.CommandPath(), "sparsesync ") + ": "
}

// jsonRequested reports whether the command was given --json.
func jsonRequested(cmd *cobra.Command) bool {
	f := cmd.Flags().Lookup("json")
	return f != nil && f.Value.String() == "true"
}

// exitCode maps an error to the documented exit status: 0 for a command
// that finished its work (an interrupt that came after that changes
// nothing: `local --atomic` renamed the new file into place), 130 for one
// that was interrupted (SIGINT, SIGTERM), whatever error it returned.
// Services (serve, disks) return ctx.Err() when a signal stops them.
func exitCode(ctx context.Context, err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return 130
	case errors.As(err, new(usageError)):
		return 2
	default:
		return 1
	}
}

// errorLine renders err as exactly one line for stderr, with one
// "sparsesync: " prefix and no package names of sentinels in it.
func errorLine(err error) string {
	line, _ := renderError(err)
	return line
}

// renderError is errorLine, and whether the line names no command: err's
// text started with a library's sentinel.
func renderError(err error) (line string, unnamed bool) {
	msg, unnamed := errtext.Strip(err.Error(), err)
	return "sparsesync: " + strings.ReplaceAll(msg, "\n", " "), unnamed
}

// stderrLine prints one line on stderr, clearing a progress bar first.
func (g *globalOpts) stderrLine(s string) {
	fmt.Fprintln(g.stderr, s)
}
