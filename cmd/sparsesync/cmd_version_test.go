package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVersion: `version` and `--version` print the same line, built from
// the binary's build information.
func TestVersion(t *testing.T) {
	out, stderr, code, _ := runCLI(t, "version")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, versionString()+"\n", out)
	out2, _, code, _ := runCLI(t, "--version")
	require.Equal(t, 0, code)
	require.Equal(t, out, out2)

	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/sparsesync/sparsesync", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-11-24T04:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	require.Equal(t, "sparsesync v1.2.3 (revision 0123abcd+modified, 2026-11-24T04:00:00Z, "+runtime.Version()+")", formatVersion(bi))
	bi.Settings = bi.Settings[:1]
	require.Equal(t, "sparsesync v1.2.3 (revision 0123abcd, "+runtime.Version()+")", formatVersion(bi))
	require.Equal(t, "sparsesync unknown (revision unknown, "+runtime.Version()+")", formatVersion(nil))
}

// TestVersionStamped: the built binary prints the revision git names for
// HEAD, taken from the build information the go command stamps into it.
// It needs a real clone (a .git directory; Go does not stamp from a
// worktree's .git file) and the git command.
func TestVersionStamped(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		t.Skip("not a git clone (no .git directory): the go command stamps no revision")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("needs git to name HEAD")
	}
	head, err := exec.Command(git, "-C", root, "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	bin := buildBinary(t)
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).Output()
		require.NoError(t, err, arg)
		require.Contains(t, string(out), "(revision "+strings.TrimSpace(string(head)), arg)
		require.True(t, strings.HasPrefix(string(out), "sparsesync v"), "%s: %q names no module version", arg, out)
	}
}
