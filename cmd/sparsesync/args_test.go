package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestArgCountNamesTheCommand: every command given too many positional
// arguments exits 2 with one line that names the command (cobra's own
// count errors name none, and no text is matched to add the name), and
// a command that needs arguments given none says so naming itself.
func TestArgCountNamesTheCommand(t *testing.T) {
	many := []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9"}
	for _, path := range leafCommands() {
		args := append(strings.Fields(path), many...)
		_, stderr, code, _ := runCLI(t, args...)
		if code != 2 || path == "help" {
			continue // takes any number (completion, replica check), or topics (help)
		}
		require.Equal(t, 1, strings.Count(stderr, "\n"), "%s: %q", path, stderr)
		named := strings.HasPrefix(stderr, "sparsesync: "+path+": ") ||
			strings.HasSuffix(stderr, `for "sparsesync `+path+`"`+"\n") // cobra.NoArgs names it
		require.True(t, named, "%s: %q", path, stderr)
	}
	for _, c := range []struct{ args, want string }{
		{"local", "sparsesync: local: accepts 2 arg(s), received 0\n"},
		{"replica info", "sparsesync: replica info: accepts 1 arg(s), received 0\n"},
		{"replica check", "sparsesync: replica check: requires at least 1 arg(s), only received 0\n"},
	} {
		_, stderr, code, _ := runCLI(t, strings.Fields(c.args)...)
		require.Equal(t, 2, code, stderr)
		require.Equal(t, c.want, stderr)
	}
}
