package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
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

// sentinelPackages are the packages whose sentinels carry their name
// ("disks: another agent holds the disk"), which the CLI's line, naming
// the command, leaves out. Only a sentinel's own text loses it: a path
// such as /mnt/d1/disks in the message is never touched.
var sentinelPackages = []string{"tcpsync", "localsync", "replica", "sparse", "target", "disks", "qos"}

// libraryPrefixes are the package prefixes still put on errors that are
// not sentinels: only tcpsync's wire, client, server and role files do.
// The list (and its string surgery in errorLine) goes when they stop.
var libraryPrefixes = []string{"tcpsync: "}

// errorLine renders err as exactly one line for stderr, with one
// "sparsesync: " prefix and no package names of sentinels in it.
func errorLine(err error) string {
	line, _ := renderError(err)
	return line
}

// renderError is errorLine, and whether the line names no command: err's
// text started with a library's sentinel (or, until tcpsync's prefixes
// go, with "tcpsync: ").
func renderError(err error) (line string, unnamed bool) {
	msg := strings.TrimPrefix(strings.ReplaceAll(err.Error(), "\n", " "), "sparsesync: ")
	for _, s := range sentinels(err, nil) {
		text := strings.ReplaceAll(s.Error(), "\n", " ")
		pkg, bare, ok := strings.Cut(text, ": ")
		if !ok || !slices.Contains(sentinelPackages, pkg) {
			continue
		}
		if i := strings.LastIndex(msg, text); i >= 0 {
			unnamed = unnamed || i == 0
			msg = msg[:i] + bare + msg[i+len(text):]
		}
	}
	// tcpsync's non-sentinel errors: remove with libraryPrefixes.
	if head, rest, ok := strings.Cut(msg, ": "); ok {
		for _, p := range libraryPrefixes {
			rest = strings.ReplaceAll(rest, p, "")
		}
		msg = head + ": " + rest
	}
	if rest, ok := strings.CutPrefix(msg, "tcpsync: "); ok {
		msg, unnamed = rest, true
	}
	return "sparsesync: " + msg, unnamed
}

// sentinels appends the errors in err's tree that wrap nothing (the
// sentinels, whose text is all their own) to dst.
func sentinels(err error, dst []error) []error {
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			return sentinels(inner, dst)
		}
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			dst = sentinels(e, dst)
		}
		return dst
	}
	if err == nil {
		return dst
	}
	return append(dst, err)
}

// stderrLine prints one line on stderr, clearing a progress bar first.
func (g *globalOpts) stderrLine(s string) {
	fmt.Fprintln(g.stderr, s)
}
