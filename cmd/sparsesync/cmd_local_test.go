package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
)

func TestLocalJSON(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	l := layout.Layout{Size: 8 << 20, Data: layout.Ranges(0, 1<<20, 6<<20, 4096)}
	layout.Create(t, src, l)
	out, errOut, code, _ := runCLI(t, "local", "--json", src, dst)
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut, "no progress bar on a non-terminal")
	require.Equal(t, 1, strings.Count(out, "\n"), "exactly one JSON object: %q", out)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	assert.Equal(t, []string{"bwlimit", "cloned_bytes", "copied_bytes", "data_bytes", "direct_read_bytes", "dst", "manifest_bytes", "method", "punched_bytes",
		"quick_check", "seconds", "size", "src", "throttled_seconds", "unchanged_bytes", "zero_bytes", "zero_filled_bytes"}, keys)
	assert.Equal(t, src, got["src"])
	assert.Equal(t, dst, got["dst"])
	assert.EqualValues(t, l.Size, got["size"])
	assert.EqualValues(t, l.DataBytes(), got["data_bytes"])
	assert.EqualValues(t, l.DataBytes(), got["cloned_bytes"].(float64)+got["copied_bytes"].(float64))
	assert.Contains(t, []any{"reflink", "copy_file_range", "read_write", "mixed"}, got["method"])
	a, _ := os.ReadFile(src)
	b, _ := os.ReadFile(dst)
	assert.True(t, bytes.Equal(a, b))

	assert.Equal(t, false, got["quick_check"], "a first copy")

	// Unchanged since a verified copy: the mark on dst ends the re-sync
	// without reading (where the filesystem keeps user extended
	// attributes, as the test's temporary directory's does on Linux);
	// --full-compare compares anyway.
	for _, full := range []bool{false, true} {
		args := []string{"local", "--json", "--method", "read-write", src, dst}
		if full {
			args = append(args[:1], append([]string{"--full-compare"}, args[1:]...)...)
		}
		out, _, code, _ = runCLI(t, args...)
		require.Equal(t, 0, code)
		got = nil
		require.NoError(t, json.Unmarshal([]byte(out), &got))
		assert.EqualValues(t, l.DataBytes(), got["unchanged_bytes"])
		assert.EqualValues(t, 0, got["copied_bytes"])
		if full || runtime.GOOS != "linux" {
			assert.Equal(t, false, got["quick_check"], "full %v", full)
		} else {
			assert.Equal(t, true, got["quick_check"], "full %v", full)
		}
	}

	out, _, code, _ = runCLI(t, "local", src, dst)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "unchanged 1.0 MiB")

	// Written zeros are data to SEEK_DATA; --detect-zeros leaves them as
	// holes and says how many bytes in zero_bytes, so the numbers add up.
	f, err := os.OpenFile(src, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 64<<10), 4<<20)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	out, _, code, _ = runCLI(t, "local", "--json", "--detect-zeros", src, filepath.Join(dir, "dst2"))
	require.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.EqualValues(t, 64<<10, got["zero_bytes"])
	assert.EqualValues(t, got["data_bytes"], got["cloned_bytes"].(float64)+got["copied_bytes"].(float64)+got["zero_bytes"].(float64))
}

func TestLocalErrors(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	require.NoError(t, os.WriteFile(src, []byte("data"), 0o644))
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"local", filepath.Join(dir, "missing"), filepath.Join(dir, "x")}, 1, "missing"},
		{[]string{"local", src, src}, 1, "same file"},
		{[]string{"local", src, filepath.Join(dir, "no", "dst")}, 1, filepath.Join(dir, "no", "dst")},
		{[]string{"local", "--method", "teleport", src, filepath.Join(dir, "y")}, 2, "teleport"},
		{[]string{"local", "--reflink", "always", "--method", "read-write", src, filepath.Join(dir, "y")}, 2, "reflink always"},
		{[]string{"local", "--progress", "sometimes", src, filepath.Join(dir, "y")}, 2, "sometimes"},
		{[]string{"local", src}, 2, "2 arg"},
	}
	for _, tc := range cases {
		out, errOut, code, _ := runCLI(t, tc.args...)
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, errOut)
		assert.Empty(t, out)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "one error line: %q", errOut)
		assert.Contains(t, errOut, tc.want)
		assert.NoFileExists(t, filepath.Join(dir, "y"))
	}
	b, _ := os.ReadFile(src)
	assert.Equal(t, "data", string(b))
}

func TestLocalProgressAlways(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	layout.Create(t, src, layout.Layout{Size: 4 << 20, Data: layout.Ranges(0, 4<<20)})
	var out, errOut bytes.Buffer
	g := &globalOpts{stdout: &out, stderr: &errOut}
	opts := &localOpts{method: "read-write", reflink: "auto", progress: "always", noSync: true}
	require.NoError(t, runLocal(context.Background(), g, opts, src, dst))
	assert.Contains(t, out.String(), "copied 4.0 MiB")
	// The bar waits a second before drawing; render one directly.
	bar := &progressBar{width: 60, start: time.Now()}
	bar.shown.update(1<<20, 4<<20)
	line := bar.line(time.Second)
	assert.Contains(t, line, " 25% 1.0 MiB/4.0 MiB 1.0 MiB/s ETA 3s")
	assert.LessOrEqual(t, len(line), 60)
}

func TestDemo(t *testing.T) {
	dir := t.TempDir()
	out, errOut, code, _ := runCLI(t, "demo", "--dir", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "punched 512.0 KiB")
	assert.Contains(t, out, "unchanged 3.0 MiB, punched 512.0 KiB")
	assert.Contains(t, out, "copy.img is identical to disk.img, byte for byte and hole for hole: true")
	assert.Contains(t, out, "copied 3.3 MiB, unchanged 0 B, punched 0 B; on the wire 3.3 MiB sent", "the first push sends the data, not the holes")
	assert.Contains(t, out, "copied 8.0 KiB, unchanged 3.2 MiB", "the second push sends only the two changed blocks")
	assert.Contains(t, out, "remote/disk.img is identical to disk.img, byte for byte and hole for hole: true")
	assert.Regexp(t, `\n   sparsesync push --no-auth disk\.img 127\.0\.0\.1:\d+ disk\.img\n`, out, "the push line works as typed against the demo's server")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "demo cleans up")
}

// TestLocalManifest: local keeps DST.sparsesync by default, and the second
// re-sync after a copy reports the destination bytes it did not read;
// --manifest=false keeps none and removes an old one.
func TestLocalManifest(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	l := layout.Layout{Size: 8 << 20, Data: layout.Ranges(0, 2<<20, 6<<20, 1<<20)}
	layout.Create(t, src, l)
	round := 0
	resync := func(args ...string) map[string]any {
		t.Helper()
		f, err := os.OpenFile(src, os.O_WRONLY, 0)
		require.NoError(t, err)
		round++
		_, err = f.WriteAt([]byte{byte(round)}, 6<<20+4096)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		out, errOut, code, _ := runCLI(t, append(append([]string{"local", "--json"}, args...), src, dst)...)
		require.Equal(t, 0, code, errOut)
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &got))
		a, err := os.ReadFile(src)
		require.NoError(t, err)
		b, err := os.ReadFile(dst)
		require.NoError(t, err)
		require.True(t, bytes.Equal(a, b), "dst differs from src")
		return got
	}
	_, errOut, code, _ := runCLI(t, "local", src, dst)
	require.Equal(t, 0, code, errOut)
	assert.EqualValues(t, 0, resync()["manifest_bytes"], "the first re-sync reads both files")
	require.FileExists(t, dst+".sparsesync")
	got := resync()
	assert.EqualValues(t, 3<<20-64<<10, got["manifest_bytes"], "all but the changed 64 KiB block vouched for")
	assert.EqualValues(t, 4096, got["copied_bytes"])
	assert.EqualValues(t, 0, resync("--manifest=false")["manifest_bytes"])
	assert.NoFileExists(t, dst+".sparsesync")
}
