package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlanSampleState: the sample cluster under docs/examples/plan gives
// the output its README shows: a placement, a volume that cannot be
// placed with its reasons, a disk-pressure move, and CPU requests.
func TestPlanSampleState(t *testing.T) {
	dir := filepath.Join(docsDir, "examples", "plan")
	state, nodes := filepath.Join(dir, "longhorn-state.json"), filepath.Join(dir, "kubernetes-nodes.json")
	var got strings.Builder
	for _, args := range [][]string{
		{"plan", "place", "--state", state},
		{"plan", "rebalance", "--state", state},
		{"plan", "cpu", "--state", state, "--state", nodes},
	} {
		out, stderr, code, _ := runCLI(t, args...)
		require.Equal(t, 0, code, "%v: %s", args, stderr)
		got.WriteString(out)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```text\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	require.NotEmpty(t, blocks, "no output block in the README")
	require.Equal(t, blocks[len(blocks)-1][1], got.String())
	require.Contains(t, got.String(), "(disk-pressure)")
	require.Contains(t, got.String(), "unschedulable pvc-c41a7e90-archive")
}
