package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// The documentation: the README and the pages of docs/ (not docs/pending/,
// where notes wait to be folded into a page).
const (
	moduleRoot = "../.."
	readmePath = moduleRoot + "/README.md"
	docsDir    = moduleRoot + "/docs"
)

// docFiles returns the README and every docs/*.md page.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(docsDir, "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, pages, "docs/ has pages")
	return append([]string{readmePath}, pages...)
}

// mdLink is a Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// headingAnchor is GitHub's anchor for a heading: lower case, punctuation
// but '-' dropped, spaces as '-'.
func headingAnchor(heading string) string {
	heading = strings.ToLower(strings.TrimSpace(strings.TrimLeft(heading, "#")))
	var b strings.Builder
	for _, r := range heading {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdHeadings returns the anchors of a Markdown file's headings (not the
// comment lines of its code blocks).
func mdHeadings(text string) map[string]bool {
	anchors := map[string]bool{}
	fence := false
	for line := range strings.SplitSeq(text, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			fence = !fence
		case !fence && strings.HasPrefix(line, "#"):
			anchors[headingAnchor(line)] = true
		}
	}
	return anchors
}

// TestDocsReachable checks that every docs/ page is linked from the README,
// and that every relative link of the README and the pages names a file
// (and a heading) that exists, never docs/pending/.
func TestDocsReachable(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	require.NoError(t, err)
	linked := map[string]bool{}
	for _, m := range mdLink.FindAllStringSubmatch(string(readme), -1) {
		linked[filepath.Clean(strings.SplitN(m[1], "#", 2)[0])] = true
	}
	for _, page := range docFiles(t)[1:] {
		rel, err := filepath.Rel(moduleRoot, page)
		require.NoError(t, err)
		require.True(t, linked[rel], "README.md does not link %s", rel)
	}
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, m := range mdLink.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
			}
			rel, _ := filepath.Rel(moduleRoot, dest)
			require.False(t, strings.HasPrefix(rel, "docs/pending"), "%s links %s: docs/pending/ is not published", file, target)
			if fi, err := os.Stat(dest); err == nil && fi.IsDir() {
				continue // a link to a directory of the tree
			}
			b, err := os.ReadFile(dest)
			require.NoError(t, err, "%s links %s", file, target)
			if anchor != "" {
				require.True(t, mdHeadings(string(b))[anchor], "%s links %s: no heading with that anchor in %s", file, target, rel)
			}
		}
	}
}

// docCommand is one "sparsesync ..." invocation found in the documentation.
type docCommand struct {
	where string   // file:line
	words []string // after "sparsesync"
}

// inlineCode matches a Markdown code span.
var inlineCode = regexp.MustCompile("`([^`]+)`")

// shellComment is where a shell comment starts.
var shellComment = regexp.MustCompile(`(^|\s)#`)

// shellSeparator separates the commands of a shell line.
var shellSeparator = regexp.MustCompile(`\s(\|\||&&|;|\||>|<)\s`)

// docCommands returns every sparsesync invocation of a Markdown file: the
// lines of its code blocks (continuations joined, "$ " prompts dropped) and
// its code spans that start with "sparsesync ", comments dropped, cut at
// pipes, ";", "&&" and redirections.
func docCommands(file, text string) []docCommand {
	var out []docCommand
	add := func(line int, s string) {
		s = strings.NewReplacer("[", " ", "]", " ", `\|`, "|").Replace(s)
		for _, part := range shellSeparator.Split(" "+s+" ", -1) {
			words := strings.Fields(part)
			for i, w := range words {
				if w == "sparsesync" && i+1 < len(words) {
					out = append(out, docCommand{where: file + ":" + strconv.Itoa(line), words: words[i+1:]})
					break
				}
			}
		}
	}
	lines := strings.Split(text, "\n")
	fence := false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		if fence {
			start := i
			for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
				i++
				line = strings.TrimSuffix(line, `\`) + " " + lines[i]
			}
			if loc := shellComment.FindStringIndex(line); loc != nil {
				line = line[:loc[0]]
			}
			line = strings.TrimPrefix(strings.TrimSpace(line), "$ ")
			if strings.HasPrefix(line, "sparsesync ") || strings.Contains(line, " sparsesync ") {
				add(start+1, line)
			}
			continue
		}
		for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
			if strings.HasPrefix(m[1], "sparsesync ") {
				add(i+1, m[1])
			}
		}
	}
	return out
}

// checkDocCommand resolves c's subcommands in the command tree and checks
// each of its flags exists there; it returns what is wrong, or "".
func checkDocCommand(root *cobra.Command, c docCommand) string {
	cmd := root
	words := c.words
	// Subcommands: each word (or each of "a|b|c") must be one while the
	// command has subcommands and the word is not a flag.
	for len(words) > 0 && cmd.HasSubCommands() && !strings.HasPrefix(words[0], "-") {
		var next *cobra.Command
		for _, alt := range strings.Split(words[0], "|") {
			sub, _, err := cmd.Find([]string{alt})
			if err != nil || sub == cmd {
				return "sparsesync " + strings.Join(c.words, " ") + ": " + cmd.CommandPath() + " has no command " + alt
			}
			next = sub
		}
		cmd, words = next, words[1:]
	}
	cmd.InitDefaultHelpFlag()
	root.InitDefaultVersionFlag()
	for _, w := range words {
		if !strings.HasPrefix(w, "-") || w == "-" || strings.Trim(w, "-0123456789.") == "" {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
		var f bool
		if strings.HasPrefix(w, "--") {
			f = cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil
		} else {
			f = len(name) == 1 && (cmd.Flags().ShorthandLookup(name) != nil || cmd.InheritedFlags().ShorthandLookup(name) != nil)
		}
		if !f {
			return "sparsesync " + strings.Join(c.words, " ") + ": " + cmd.CommandPath() + " has no flag " + w
		}
	}
	return ""
}

// TestDocsCommandsExist checks every sparsesync command line and code span
// of the README and the docs pages against the command tree: every
// subcommand and every flag must exist, so a renamed or removed one fails
// here instead of misleading a reader.
func TestDocsCommandsExist(t *testing.T) {
	root := newRootCommand(&globalOpts{stdout: &strings.Builder{}, stderr: &strings.Builder{}})
	n := 0
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(file)
		require.NoError(t, err)
		rel, _ := filepath.Rel(moduleRoot, file)
		for _, c := range docCommands(rel, string(text)) {
			n++
			if msg := checkDocCommand(root, c); msg != "" {
				t.Errorf("%s: %s", c.where, msg)
			}
		}
	}
	require.Greater(t, n, 50, "sparsesync commands found in the documentation")

	// A flag named on its own in the prose (`--retries`) must be a flag of
	// some command, or one of the other tools' flags the docs compare with.
	all := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		c.Flags().VisitAll(func(f *pflag.Flag) { all[f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for _, f := range otherToolsFlags {
		all[f] = true
	}
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(file)
		require.NoError(t, err)
		rel, _ := filepath.Rel(moduleRoot, file)
		for i, line := range strings.Split(string(text), "\n") {
			for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
				if name, ok := strings.CutPrefix(m[1], "--"); ok {
					name, _, _ = strings.Cut(strings.Fields(name)[0], "=")
					if !all[name] {
						t.Errorf("%s:%d: `%s`: no command has the flag --%s", rel, i+1, m[1], name)
					}
				}
			}
		}
	}
}

// otherToolsFlags are the flags of rsync and cp the docs name in their
// comparisons.
var otherToolsFlags = []string{"sparse", "inplace", "ignore-times", "stats"}

// TestDocsCommandsCatch checks the checker on stale commands.
func TestDocsCommandsCatch(t *testing.T) {
	root := newRootCommand(&globalOpts{stdout: &strings.Builder{}, stderr: &strings.Builder{}})
	for _, tc := range []struct{ text, want string }{
		{"```sh\nsparsesync copy a b\n```\n", "has no command copy"},
		{"Run `sparsesync local --fast a b`.\n", "has no flag --fast"},
		{"`sparsesync replica create\\|frobnicate`\n", "has no command frobnicate"},
		{"```sh\nsparsesync serve --root r \\\n    --tokenfile t\n```\n", "has no flag --tokenfile"},
		{"```\n$ sparsesync plan place -Z\n```\n", "has no flag -Z"},
	} {
		cmds := docCommands("x.md", tc.text)
		require.Len(t, cmds, 1, tc.text)
		require.Contains(t, checkDocCommand(root, cmds[0]), tc.want, tc.text)
	}
	for _, ok := range []string{
		"```sh\nsparsesync local --json --reflink=never a b\n```\n",
		"`sparsesync plan place\\|rebalance\\|cpu --state FILE`\n",
		"```sh\nsparsesync push --token-file tok [--tls-pin X] a h:1 b --json # a comment --bogus\n```\n",
		"`sparsesync --version`\n",
	} {
		cmds := docCommands("x.md", ok)
		require.Len(t, cmds, 1, ok)
		require.Empty(t, checkDocCommand(root, cmds[0]), ok)
	}
}

// layoutRow matches a row of the README's Layout table: | `path/` | ... |
var layoutRow = regexp.MustCompile("^\\| `([a-z0-9_/.-]+)/` \\|")

// TestREADMELayoutTable checks the README's Layout table against go list:
// one row per package of the module, and no row for a package that is gone.
func TestREADMELayoutTable(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command to list the packages")
	}
	// Read every directory of the module, so go test's cache (which records
	// what the test opens, not what its go list child reads) reruns the
	// test when a package comes or goes.
	require.NoError(t, filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path != moduleRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		return err
	}))
	cmd := exec.CommandContext(t.Context(), gobin, "list", "-e", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = moduleRoot
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	var pkgs []string
	for p := range strings.FieldsSeq(string(out)) {
		rel, ok := strings.CutPrefix(p, "github.com/sparsesync/sparsesync/")
		require.True(t, ok, "go list listed %s", p)
		pkgs = append(pkgs, rel)
	}
	readme, err := os.ReadFile(readmePath)
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(readme), "\n## Layout\n")
	require.True(t, ok, "README.md has a Layout section")
	table, _, _ = strings.Cut(table, "\n## ")
	var rows []string
	for line := range strings.SplitSeq(table, "\n") {
		if m := layoutRow.FindStringSubmatch(line); m != nil {
			rows = append(rows, m[1])
		}
	}
	slices.Sort(pkgs)
	slices.Sort(rows)
	require.Equal(t, pkgs, rows, "the README's Layout table (one row per package, as `path/`) against go list ./...")
}

// TestREADMELibraryExample checks that the README's Go example is the body
// of localsync's ExampleCopy, which go test compiles and runs.
func TestREADMELibraryExample(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(readme), "\n```go\n")
	require.True(t, ok, "README.md has a ```go block")
	block, _, ok = strings.Cut(block, "\n```\n")
	require.True(t, ok)
	src, err := os.ReadFile(moduleRoot + "/localsync/example_test.go")
	require.NoError(t, err)
	_, body, ok := strings.Cut(string(src), "\nfunc ExampleCopy() {\n")
	require.True(t, ok, "localsync/example_test.go has ExampleCopy")
	body, _, ok = strings.Cut(body, "\n}\n")
	require.True(t, ok)
	var lines []string
	for line := range strings.SplitSeq(body, "\n") {
		lines = append(lines, strings.TrimPrefix(line, "\t"))
	}
	require.Equal(t, strings.Join(lines, "\n"), block, "README.md's Library example is ExampleCopy's body, one tab less")
}
