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
