package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/replica/rebuild"
)

// TestReplicaRebuildTwoRemotes: replica rebuild --remote ADDR/DIR twice
// rebuilds from two servers, each holding a copy under its own name; the
// result passes replica check with the source and exports the same bytes.
func TestReplicaRebuildTwoRemotes(t *testing.T) {
	root := t.TempDir()
	rootA, rootB := filepath.Join(root, "a"), filepath.Join(root, "b")
	src, twin, dst := filepath.Join(rootA, "r1"), filepath.Join(rootB, "r2"), filepath.Join(root, "dst")
	r, err := replica.Create(src, 16<<20, nil)
	require.NoError(t, err)
	_, err = r.WriteAt(bytes.Repeat([]byte("a"), 6<<20), 0)
	require.NoError(t, err)
	require.NoError(t, r.Snapshot("s1", nil))
	_, err = r.WriteAt(bytes.Repeat([]byte("b"), 5<<20), 8<<20)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	_, err = rebuild.Rebuild(t.Context(), src, twin, nil)
	require.NoError(t, err)
	tok := writeToken(t, root)
	addrA, _ := startServe(t, serveOptions{root: rootA, listen: "127.0.0.1:0", tokenFile: tok})
	addrB, _ := startServe(t, serveOptions{root: rootB, listen: "127.0.0.1:0", tokenFile: tok})

	_, stderr, code, err := runCLI(t, "replica", "rebuild", "--no-local", "--token-file", tok, "--progress", "never",
		"--remote", addrA+"/r1", "--remote", addrB+"/r2", src, dst)
	require.NoError(t, err, stderr)
	require.Zero(t, code)
	rep, err := replica.Check([]string{src, dst}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{src, dst}, rep.RW)
	a, b := filepath.Join(root, "a.img"), filepath.Join(root, "b.img")
	_, stderr, code, err = runCLI(t, "replica", "export", src, a)
	require.NoError(t, err, stderr)
	require.Zero(t, code)
	_, stderr, code, err = runCLI(t, "replica", "export", dst, b)
	require.NoError(t, err, stderr)
	require.Zero(t, code)
	ab, err := os.ReadFile(a)
	require.NoError(t, err)
	bb, err := os.ReadFile(b)
	require.NoError(t, err)
	require.True(t, bytes.Equal(ab, bb))

	// A second --remote that is not an address is bad usage.
	_, _, code, _ = runCLI(t, "replica", "rebuild", "--no-local", "--token-file", tok,
		"--remote", addrA+"/r1", "--remote", "nowhere/r2", src, filepath.Join(root, "dst2"))
	require.Equal(t, 2, code)
}
