package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newManCommand(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "man DIR",
		Short: "Write a man page per command (section 1) into DIR",
		Long: "man writes sparsesync.1 and one page per command and subcommand (sparsesync-push.1,\n" +
			"sparsesync-replica-rebuild.1, ...) into DIR, made from the same text as --help.\n\n" +
			"Examples:\n" +
			"  sparsesync man /usr/local/share/man/man1 && mandb -q\n" +
			"  sparsesync man /tmp/man && man -l /tmp/man/sparsesync-serve.1\n" + exitCodesHelp,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMan(cmd.Context(), cmd.Root(), args[0])
		},
	}
}

// runMan writes a page for root and every visible command beneath it.
func runMan(ctx context.Context, root *cobra.Command, dir string) error {
	fi, err := os.Stat(dir)
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe):
		return fmt.Errorf("man: %s: %w", dir, pe.Err)
	case err != nil:
		return fmt.Errorf("man: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("man: %s: not a directory", dir)
	}
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if c.Hidden || c.Name() == "help" {
			return nil
		}
		name := strings.ReplaceAll(c.CommandPath(), " ", "-")
		if err := os.WriteFile(filepath.Join(dir, name+".1"), []byte(manPage(c)), 0o644); err != nil {
			return fmt.Errorf("man: %w", err)
		}
		for _, sub := range c.Commands() {
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(root)
}

// manPage renders c as roff (man(7) macros): the help text as it is, in a
// no-fill block, so its own line breaks and indentation stand.
func manPage(c *cobra.Command) string {
	var b strings.Builder
	name := strings.ReplaceAll(c.CommandPath(), " ", "-")
	fmt.Fprintf(&b, ".TH %q 1 \"\" \"sparsesync %s\" \"sparsesync manual\"\n", strings.ToUpper(name), roffEscape(versionString()))
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", roffEscape(name), roffEscape(c.Short))
	fmt.Fprintf(&b, ".SH SYNOPSIS\n.nf\n%s\n.fi\n", roffLines(c.UseLine()))
	long := c.Long
	if long == "" {
		long = c.Short
	}
	fmt.Fprintf(&b, ".SH DESCRIPTION\n.nf\n%s\n.fi\n", roffLines(strings.TrimRight(long, "\n")))
	if c.Example != "" {
		fmt.Fprintf(&b, ".SH EXAMPLES\n.nf\n%s\n.fi\n", roffLines(c.Example))
	}
	if fs := c.NonInheritedFlags(); fs.HasAvailableFlags() {
		fmt.Fprintf(&b, ".SH OPTIONS\n%s", roffFlags(fs))
	}
	if fs := c.InheritedFlags(); fs.HasAvailableFlags() {
		fmt.Fprintf(&b, ".SH OPTIONS INHERITED FROM PARENT COMMANDS\n%s", roffFlags(fs))
	}
	var see []string
	if c.HasParent() {
		see = append(see, strings.ReplaceAll(c.Parent().CommandPath(), " ", "-")+"(1)")
	}
	for _, sub := range c.Commands() {
		if !sub.Hidden && sub.Name() != "help" {
			see = append(see, strings.ReplaceAll(sub.CommandPath(), " ", "-")+"(1)")
		}
	}
	if len(see) > 0 {
		fmt.Fprintf(&b, ".SH SEE ALSO\n%s\n", roffEscape(strings.Join(see, ", ")))
	}
	return b.String()
}

func roffFlags(fs *pflag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		head := "--" + f.Name
		if f.Shorthand != "" {
			head = "-" + f.Shorthand + ", " + head
		}
		if t := f.Value.Type(); t != "bool" {
			head += " " + t
		}
		text := f.Usage
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" {
			text += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(&b, ".TP\n\\fB%s\\fR\n%s\n", roffEscape(head), roffLines(text))
	})
	return b.String()
}

// roffEscape makes text safe inside a roff line: backslashes and hyphens
// (which roff would take for its own).
func roffEscape(s string) string {
	return strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
}

// roffLines escapes each line of s and keeps lines that start with a dot or
// an apostrophe (requests to roff) as text.
func roffLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		l = roffEscape(l)
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			l = `\&` + l
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n")
}
