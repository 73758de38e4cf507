package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlannerErrorsDropPackagePrefix: the planners' sentinels lose their
// package name on the CLI's line, as every other package's do
// (architecture.md, "Error prefixes"): the line names the command and the
// file, not "ganeti:" or "longhorn:".
func TestPlannerErrorsDropPackagePrefix(t *testing.T) {
	state := writeState(t, "state.json", planState)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.txt")
	require.NoError(t, os.WriteFile(bad, []byte("{not a cluster\n"), 0o644))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"balance", "-t", bad}, "sparsesync: balance: " + bad},
		{[]string{"squeeze", "-t", bad}, "sparsesync: squeeze: " + bad},
		{[]string{"plan", "place", "--state", state, "--volume", "nope"}, `sparsesync: plan place: volume "nope": no such volume`},
	} {
		_, stderr, code, _ := runCLI(t, tc.args...)
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, tc.want)
		require.NotContains(t, stderr, "ganeti: ", "no package prefix in %q", stderr)
		require.NotContains(t, stderr, "longhorn: ", "no package prefix in %q", stderr)
	}
}
