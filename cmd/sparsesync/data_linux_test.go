package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/sparse"
)

// TestDataIsOneNumber: a file with 1 MiB written and 2 MiB preallocated
// (unwritten) has 1 MiB of data for every command, whether or not the
// preallocated range's zero pages are cached. ext4 and XFS report such a
// range as data once zeros are cached over it: extents said 765 MB cold
// and 804 MB warm for one unchanged image, local and push disagreed.
func TestDataIsOneNumber(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	f, err := os.Create(src)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Truncate(8<<20))
	_, err = f.WriteAt(bytes.Repeat([]byte{0x5a}, 1<<20), 0)
	require.NoError(t, err)
	if err := unix.Fallocate(int(f.Fd()), 0, 2<<20, 2<<20); err != nil {
		t.Skipf("fallocate on %s: %v", dir, err)
	}
	require.NoError(t, f.Sync())
	unwritten := false
	require.NoError(t, sparse.Fiemap(t.Context(), f, 0, 8<<20, func(x sparse.FiemapExtent) error {
		unwritten = unwritten || x.Flags&sparse.FiemapUnwritten != 0
		return nil
	}))
	if !unwritten {
		t.Skipf("%s shows no unwritten extents (FIEMAP): the case this test is about cannot arise there", dir)
	}
	extentsData := func() int64 {
		out, stderr, code, _ := runCLI(t, "extents", "--json", src)
		require.Equal(t, 0, code, stderr)
		var doc extentsJSON
		require.NoError(t, json.Unmarshal([]byte(out), &doc))
		return doc.DataBytes
	}
	require.Equal(t, int64(1<<20), extentsData(), "cold")
	// Cache the preallocated range's zeros.
	_, err = f.ReadAt(make([]byte, 2<<20), 2<<20)
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), extentsData(), "after reading the preallocated range")

	out, stderr, code, _ := runCLI(t, "local", "--json", "--progress", "never", src, filepath.Join(dir, "dst"))
	require.Equal(t, 0, code, stderr)
	var loc localResult
	require.NoError(t, json.Unmarshal([]byte(out), &loc))
	require.Equal(t, int64(1<<20), loc.DataBytes, "local")

	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	tok := writeToken(t, dir)
	addr, _ := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", tokenFile: tok})
	g, pout := testGlobals()
	require.NoError(t, runPush(t.Context(), g, netOptions{tokenFile: tok, compress: "auto", blockSize: 4096, json: true}, src, addr, "dst"))
	var pushed syncResult
	require.NoError(t, json.Unmarshal(pout.Bytes(), &pushed))
	require.Equal(t, int64(1<<20), pushed.DataBytes, "push")

	w, err := sparse.NewWalker(f)
	require.NoError(t, err)
	m, err := w.DataMap(t.Context())
	require.NoError(t, err)
	require.Equal(t, []sparse.Extent{{Off: 0, Len: 1 << 20}}, m.Extents())
	require.False(t, strings.Contains(stderr, "\n"))
}
