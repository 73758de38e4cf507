package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPullFromSeveral pulls one image from three servers, one of which
// holds another version: it is dropped and named, the result is exact and
// --json reports every source.
func TestPullFromSeveral(t *testing.T) {
	dir := t.TempDir()
	tok := writeToken(t, dir)
	var from []string
	for i, fill := range []string{"a", "a", "z"} {
		root := filepath.Join(dir, "root"+string(rune('0'+i)))
		require.NoError(t, os.Mkdir(root, 0o755))
		sparseFile(t, filepath.Join(root, "disk.img"), 64<<20, map[int64]string{0: "x", 8 << 20: fill, 40 << 20: "y"})
		addr, _ := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", tokenFile: tok})
		from = append(from, "--from", addr+"/disk.img")
	}
	dst := filepath.Join(dir, "copy.img")
	args := append([]string{"pull", "--token-file", tok, "--json"}, from...)
	stdout, stderr, code, err := runCLI(t, append(args, dst)...)
	require.NoError(t, err, stderr)
	require.Zero(t, code)
	require.Contains(t, stderr, "dropped: holds another version")
	require.Equal(t, 1, strings.Count(stderr, "dropped:"), "the drop is said once: %s", stderr)
	require.Contains(t, stderr, from[5])
	var res multiResult
	require.NoError(t, json.Unmarshal([]byte(stdout), &res), stdout)
	require.True(t, res.Verified)
	require.Len(t, res.Sources, 3)
	require.NotEmpty(t, res.Sources[2].Dropped)
	require.Empty(t, res.Sources[0].Dropped)
	require.Equal(t, int64(3*4096), res.CopiedBytes)
	want, err := os.ReadFile(filepath.Join(dir, "root0", "disk.img"))
	require.NoError(t, err)
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "the copy differs")

	// Bad usage: a --from without a path, or DST plus ADDR REMOTE.
	_, _, code, _ = runCLI(t, "pull", "--token-file", tok, "--from", "127.0.0.1:1", dst)
	require.Equal(t, 2, code)
	_, _, code, _ = runCLI(t, "pull", "--token-file", tok, "--from", from[1], "127.0.0.1:1", "disk.img", dst)
	require.Equal(t, 2, code)
}

func TestParseFrom(t *testing.T) {
	s, err := parseFrom("[::1]:7373/vm1/disk.img")
	require.NoError(t, err)
	require.Equal(t, "[::1]:7373", s.Addr)
	require.Equal(t, "vm1/disk.img", s.Remote)
	s, err = parseFrom("10.0.0.2:7373/disk.img")
	require.NoError(t, err)
	require.Equal(t, "10.0.0.2:7373", s.Addr)
	for _, bad := range []string{"10.0.0.2:7373", "10.0.0.2/disk.img", "10.0.0.2:7373/../x", "10.0.0.2:7373/"} {
		_, err := parseFrom(bad)
		require.ErrorAs(t, err, new(usageError), bad)
	}
}

// TestDropLinesSayDropsAsTheyHappen: the pull's logger says a source's drop
// the moment the library reports it, in the summary's words, and remembers
// it so the summary does not say it again; other records are not printed.
func TestDropLinesSayDropsAsTheyHappen(t *testing.T) {
	var lines []string
	d := &dropLines{said: map[string]bool{}, say: func(s string) { lines = append(lines, s) }}
	log := slog.New(d)
	log.Info("multi-source pull", "dst", "x", "sources", 2)
	log.Warn("source dropped", "source", "127.0.0.1:7373/disk.img", "why", "stalled: no data")
	require.Equal(t, []string{"sparsesync: pull: source 127.0.0.1:7373/disk.img dropped: stalled: no data"}, lines)
	require.True(t, d.saw("127.0.0.1:7373/disk.img"))
	require.False(t, d.saw("127.0.0.1:7374/disk.img"))
}
