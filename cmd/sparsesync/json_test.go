package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJSONOneShape holds every --json output to the one shape of
// writeJSONLine: one compact object on one line, with <, > and & as they
// are (a path holding them reads the same in the JSON as on disk).
func TestJSONOneShape(t *testing.T) {
	dir := t.TempDir()
	odd := filepath.Join(dir, "a<b&c>.img")
	sparseFile(t, odd, 1<<20, map[int64]string{0: "a"})
	rep := filepath.Join(dir, "r<&>")
	_, stderr, code, _ := runCLI(t, "replica", "create", "--size", "1M", rep)
	require.Equal(t, 0, code, stderr)
	state := writeState(t, "state.json", planState)
	for _, args := range [][]string{
		{"extents", "--json", odd},
		{"local", "--json", odd, odd + ".copy"},
		{"replica", "info", "--json", rep},
		{"plan", "place", "--json", "--state", state},
		{"balance", "--json", "-t", ganetiTestdata + "hbal-migration-1.data"},
	} {
		stdout, stderr, code, _ := runCLI(t, args...)
		require.Equal(t, 0, code, "%v: %s", args, stderr)
		require.Equal(t, 1, strings.Count(stdout, "\n"), "%v prints one line: %s", args, stdout)
		require.True(t, strings.HasSuffix(stdout, "}\n"), "%v: %s", args, stdout)
		require.True(t, json.Valid([]byte(stdout)), "%v: %s", args, stdout)
		require.NotContains(t, stdout, `\u003c`, args)
		require.NotContains(t, stdout, `\u0026`, args)
		if strings.Contains(strings.Join(args, " "), "<&>") || strings.Contains(strings.Join(args, " "), "a<b&c>") {
			require.Contains(t, stdout, "<", "%v keeps < as it is: %s", args, stdout)
		}
	}
	_, err := os.Stat(odd + ".copy")
	require.NoError(t, err)
}
