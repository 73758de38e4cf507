package main

import (
	"runtime"
	"runtime/debug"
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
