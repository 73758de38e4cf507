package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBwlimitFlag(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	data := bytes.Repeat([]byte("sparsesync"), 100_000) // 1 MB of data
	f, err := os.Create(src)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(64<<20))
	_, err = f.WriteAt(data, 8<<20)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	for _, bad := range []string{"10X", "-1M", "fast", "1e9"} {
		_, errOut, code, _ := runCLI(t, "local", "--bwlimit", bad, src, dst)
		assert.Equal(t, 2, code, "--bwlimit %s", bad)
		assert.Contains(t, errOut, "--bwlimit: bad rate")
		assert.Contains(t, errOut, "powers of 1024", "the error gives the valid form")
		_, err := os.Stat(dst)
		assert.ErrorIs(t, err, os.ErrNotExist, "nothing written for a bad --bwlimit")
	}
	for _, bad := range []string{"realtime", "best-effort:9"} {
		_, errOut, code, _ := runCLI(t, "local", "--ionice", bad, src, dst)
		assert.Equal(t, 2, code, "--ionice %s", bad)
		assert.Contains(t, errOut, "want idle, best-effort or best-effort:0-7")
	}

	// A limit far above what 1 MB needs: the copy is exact and the limit is
	// reported (its pace is qos's and the benchmarks' to show).
	out, errOut, code, _ := runCLI(t, "local", "--json", "--bwlimit", "1G", src, dst)
	require.Equal(t, 0, code, errOut)
	var got struct {
		Bwlimit   int64    `json:"bwlimit"`
		Throttled *float64 `json:"throttled_seconds"`
		Copied    int64    `json:"copied_bytes"`
		Data      int64    `json:"data_bytes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, int64(1<<30), got.Bwlimit)
	assert.NotNil(t, got.Throttled)
	assert.Equal(t, got.Data, got.Copied)
	b, err := os.ReadFile(dst)
	require.NoError(t, err)
	assert.Equal(t, data, b[8<<20:8<<20+len(data)])

	out, _, code, _ = runCLI(t, "local", "--json", src, dst)
	require.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Zero(t, got.Bwlimit, "no --bwlimit: unlimited, reported as 0")
}

// TestBwlimitOnNetworkCommands: push, pull, push --replica, replica
// rebuild and serve take --bwlimit; a bad value exits 2 with the valid
// form before anything moves; --json reports the limit and the time
// throttled, and the bytes are exact.
func TestBwlimitOnNetworkCommands(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	addr, _ := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", noAuth: true, qos: qosFlags{bwlimit: "1G"}})
	src := filepath.Join(dir, "src.img")
	sparseFile(t, src, 4<<20, map[int64]string{0: "a", 2 << 20: "b"})
	out := filepath.Join(dir, "out.img")

	for _, args := range [][]string{
		{"push", "--no-auth", src, addr, "a.img"},
		{"pull", "--no-auth", addr, "a.img", out},
		{"push", "--no-auth", "--replica", dir, addr, "r.img"},
		{"replica", "rebuild", "--no-local", "--remote", addr, "--no-auth", filepath.Join(dir, "r"), filepath.Join(dir, "t")},
		{"serve", "--root", root, "--no-auth", "--listen", "127.0.0.1:0"},
	} {
		_, errOut, code, _ := runCLI(t, append(args, "--bwlimit", "fast")...)
		assert.Equal(t, 2, code, "%v --bwlimit fast: %s", args, errOut)
		assert.Contains(t, errOut, "--bwlimit: bad rate", args)
		assert.Contains(t, errOut, "powers of 1024", "the error gives the valid form")
	}
	_, err := os.Stat(filepath.Join(root, "a.img"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing pushed for a bad --bwlimit")

	var got struct {
		Bwlimit   int64    `json:"bwlimit"`
		Throttled *float64 `json:"throttled_seconds"`
		Copied    int64    `json:"copied_bytes"`
		Data      int64    `json:"data_bytes"`
	}
	o, errOut, code, _ := runCLI(t, "push", "--no-auth", "--json", "--bwlimit", "512M", src, addr, "a.img")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(o), &got))
	assert.Equal(t, int64(512<<20), got.Bwlimit)
	assert.NotNil(t, got.Throttled)
	assert.Equal(t, got.Data, got.Copied)
	o, errOut, code, _ = runCLI(t, "pull", "--no-auth", "--json", "--bwlimit", "1.5M", addr, "a.img", out)
	require.Equal(t, 0, code, errOut)
	got.Throttled = nil
	require.NoError(t, json.Unmarshal([]byte(o), &got))
	assert.Equal(t, int64(3<<19), got.Bwlimit)
	require.NotNil(t, got.Throttled)
	assert.Positive(t, *got.Throttled, "8 KiB of data and the protocol at 1.5M: the first pieces wait")
	a, err := os.ReadFile(src)
	require.NoError(t, err)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, a, b)
}
