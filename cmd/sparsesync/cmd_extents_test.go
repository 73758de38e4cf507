package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/sparse"
)

func syncFile(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Sync())
}

func TestExtentsPlain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img")
	layout.Create(t, path, layout.Layout{Size: 1 << 20, Data: layout.Ranges(0, 4096, 1<<19, 8192)})
	stdout, _, code, _ := runCLI(t, "extents", "--map", "always", path)
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "size:       1048576 (1.0 MiB)")
	require.Contains(t, stdout, "data:       12288 (12.0 KiB, 1.17%)")
	require.Contains(t, stdout, "extents:    2")
	require.Contains(t, stdout, "524288               8192                 532480")
	lines := strings.Split(stdout, "\n")
	var mapLine string
	for _, l := range lines {
		if strings.HasPrefix(l, "[") {
			mapLine = l
		}
	}
	require.Len(t, mapLine, 80, "map line fills the default width")
	require.Equal(t, byte('+'), mapLine[1])
	stdout, _, _, _ = runCLI(t, "extents", path)
	require.NotContains(t, stdout, "[", "no map when stdout is not a terminal")
}

func TestExtentsErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing", []string{"extents", filepath.Join(dir, "nope")}, 1, "sparsesync: extents: open " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{"directory", []string{"extents", dir}, 1, "sparsesync: extents: walk " + dir + ": is a directory"},
		{"character device", []string{"extents", "/dev/null"}, 1, "sparsesync: extents: walk /dev/null: not a regular file or block device (character device)"},
		{"no argument", []string{"extents"}, 2, "sparsesync: extents: accepts 1 arg(s), received 0"},
		{"bad flag", []string{"extents", "--nope", dir}, 2, "sparsesync: extents: unknown flag: --nope"},
		{"bad map", []string{"extents", "--map", "sometimes", dir}, 2, `sparsesync: extents: --map must be auto, always or never, not "sometimes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code, _ := runCLI(t, tc.args...)
			require.Equal(t, tc.code, code)
			require.Empty(t, stdout)
			require.Equal(t, tc.want+"\n", stderr, "one line naming the file and the cause")
		})
	}
}

func TestDataMapLine(t *testing.T) {
	mk := func(size int64, e ...sparse.Extent) sparse.Map {
		m, err := sparse.NewMap(size, e...)
		require.NoError(t, err)
		return m
	}
	for _, tc := range []struct {
		name  string
		m     sparse.Map
		width int
		want  string
	}{
		{"empty file", mk(0), 4, "    "},
		{"all hole", mk(100), 5, "....."},
		{"all data", mk(100, sparse.Extent{Off: 0, Len: 100}), 5, "#####"},
		{"last byte", mk(1000, sparse.Extent{Off: 999, Len: 1}), 4, "...+"},
		{"half cell", mk(100, sparse.Extent{Off: 10, Len: 10}), 5, "#...."},
		{"sliver", mk(100, sparse.Extent{Off: 50, Len: 1}), 5, "..+.."},
		{"wider than size", mk(3, sparse.Extent{Off: 1, Len: 1}), 6, ".#."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, dataMapLine(tc.m, tc.width))
		})
	}
}
