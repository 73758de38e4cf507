package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// TestManPages: `sparsesync man DIR` writes one page per visible command,
// each carrying the command's help and flags, and roff finds nothing
// wrong in any (groff -ww warns of every problem; none allowed).
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code, _ := runCLI(t, "man", dir)
	require.Equal(t, 0, code, stderr)
	g, _ := testGlobals()
	var want []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		want = append(want, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCommand(g))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	require.ElementsMatch(t, want, got)
	require.Contains(t, got, "sparsesync-replica-rebuild.1")

	serve, err := os.ReadFile(filepath.Join(dir, "sparsesync-serve.1"))
	require.NoError(t, err)
	require.Contains(t, string(serve), `\fB\-\-token\-file string\fR`)
	require.Contains(t, string(serve), `SIGHUP reloads the token file`)

	if groff, err := exec.LookPath("groff"); err == nil {
		args := append([]string{"-man", "-Tutf8", "-ww", "-z"}, filepath.Join(dir, "*.1"))
		pages, _ := filepath.Glob(args[len(args)-1])
		out, err := exec.Command(groff, append(args[:len(args)-1], pages...)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Empty(t, strings.TrimSpace(string(out)), "groff warnings")
	} else {
		t.Log("groff not installed: the pages' roff is not checked")
	}

	_, stderr, code, _ = runCLI(t, "man", filepath.Join(dir, "missing"))
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "man: "+filepath.Join(dir, "missing")+": no such file or directory")
}
