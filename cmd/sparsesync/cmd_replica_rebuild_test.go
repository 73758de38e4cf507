package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/replica"
)

func TestReplicaRebuildExportPushCommands(t *testing.T) {
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	r, err := replica.Create(src, 4<<20, nil)
	require.NoError(t, err)
	_, err = r.WriteAt(bytes.Repeat([]byte("a"), 8192), 0)
	require.NoError(t, err)
	require.NoError(t, r.Snapshot("s1", nil))
	_, err = r.WriteAt(bytes.Repeat([]byte("b"), 4096), 1<<20)
	require.NoError(t, err)
	require.NoError(t, r.Close())

	g, out := testGlobals()
	require.NoError(t, runReplicaRebuild(t.Context(), g, replicaRebuildOptions{json: true}, src, dst))
	var res map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	require.Equal(t, src, res["source"])
	require.Equal(t, dst, res["target"])
	require.Equal(t, "local", res["path"])
	require.Equal(t, "", res["fallback_reason"])
	require.Contains(t, res, "seconds")
	files := res["files"].([]any)
	require.Len(t, files, 4)
	f0 := files[0].(map[string]any)
	require.Equal(t, "volume-snap-s1.img", f0["name"])
	for _, k := range []string{"copied_bytes", "cloned_bytes", "unchanged_bytes"} {
		require.Contains(t, f0, k)
	}
	info, err := replica.Inspect(src, nil)
	require.NoError(t, err)
	require.NotNil(t, info.Revision)
	require.Positive(t, *info.Revision)
	require.Equal(t, float64(*info.Revision), res["revision"], "the target gets the source's count")
	require.Len(t, res, 9, "the documented keys, bwlimit and throttled_seconds included")

	// Export both; the images are identical.
	a, b := filepath.Join(root, "a.img"), filepath.Join(root, "b.img")
	out.Reset()
	require.NoError(t, runReplicaExport(t.Context(), g, replicaExportOptions{json: true}, src, a))
	var ex map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &ex))
	require.Equal(t, float64(4<<20), ex["size"])
	require.Equal(t, float64(12288), ex["data_bytes"])
	require.Equal(t, float64(2), ex["layers"])
	out.Reset()
	require.NoError(t, runReplicaExport(t.Context(), g, replicaExportOptions{}, dst, b))
	require.Contains(t, out.String(), "exported "+dst+" to "+b)
	ab, err := os.ReadFile(a)
	require.NoError(t, err)
	bb, err := os.ReadFile(b)
	require.NoError(t, err)
	require.True(t, bytes.Equal(ab, bb))

	// Bad input: one line naming the directory, nothing written.
	err = runReplicaExport(t.Context(), g, replicaExportOptions{}, filepath.Join(root, "none"), filepath.Join(root, "c.img"))
	require.ErrorContains(t, err, filepath.Join(root, "none"))
	_, err = os.Stat(filepath.Join(root, "c.img"))
	require.True(t, os.IsNotExist(err))

	// push --replica sends the merged volume.
	sroot := filepath.Join(root, "serve")
	require.NoError(t, os.Mkdir(sroot, 0o755))
	tok := writeToken(t, root)
	addr, _ := startServe(t, serveOptions{root: sroot, listen: "127.0.0.1:0", tokenFile: tok})
	out.Reset()
	require.NoError(t, runPushReplica(t.Context(), g, netOptions{tokenFile: tok, compress: "auto", blockSize: 4096, json: true}, src, addr, "vol.img"))
	var pr map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &pr))
	require.Equal(t, true, pr["verified"])
	require.Equal(t, float64(12288), pr["data_bytes"])
	pb, err := os.ReadFile(filepath.Join(sroot, "vol.img"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(ab, pb))

	// Straight to TCP (the source is not on this machine), from the
	// server whose root holds the source directory.
	tcpDst := filepath.Join(root, "dst-tcp")
	taddr, _ := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", tokenFile: tok})
	out.Reset()
	require.NoError(t, runReplicaRebuild(t.Context(), g, replicaRebuildOptions{remote: taddr, tokenFile: tok, noLocal: true, json: true}, src, tcpDst))
	res = nil
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	require.Equal(t, "tcp", res["path"], out.String())
	c := filepath.Join(root, "c.img")
	out.Reset()
	require.NoError(t, runReplicaExport(t.Context(), g, replicaExportOptions{}, tcpDst, c))
	cb, err := os.ReadFile(c)
	require.NoError(t, err)
	require.True(t, bytes.Equal(ab, cb))
	err = runReplicaRebuild(t.Context(), g, replicaRebuildOptions{noLocal: true}, src, tcpDst)
	require.ErrorAs(t, err, new(usageError))

	// Through the command line: argument count follows --replica.
	_, _, code, _ := runCLI(t, "push", "--replica", src, "--no-auth", addr)
	require.Equal(t, 2, code)
}

// TestReplicaRebuildCounterOff: a replica without a revision counter
// (Longhorn's default since 1.7) is rebuilt and reported as having none,
// not as "revision 0" (text) or 0 (JSON).
func TestReplicaRebuildCounterOff(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	r, err := replica.Create(src, 1<<20, &replica.Options{Counter: replica.CounterOff})
	require.NoError(t, err)
	_, err = r.WriteAt(bytes.Repeat([]byte("a"), 4096), 0)
	require.NoError(t, err)
	require.NoError(t, r.Close())

	g, out := testGlobals()
	require.NoError(t, runReplicaRebuild(t.Context(), g, replicaRebuildOptions{}, src, filepath.Join(root, "t1")))
	require.Contains(t, out.String(), ", no revision counter, ")
	require.NotContains(t, out.String(), "revision 0")

	out.Reset()
	require.NoError(t, runReplicaRebuild(t.Context(), g, replicaRebuildOptions{json: true}, src, filepath.Join(root, "t2")))
	var res map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	require.Contains(t, res, "revision")
	require.Nil(t, res["revision"])
	info, err := replica.Inspect(filepath.Join(root, "t2"), nil)
	require.NoError(t, err)
	require.False(t, info.CounterEnabled)
}
