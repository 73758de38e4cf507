package rebuild

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/lhdir"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// TestRebuildFromTwoRemotes rebuilds a Longhorn-format replica over TCP
// from two servers holding healthy copies (in directories of different
// names, as Longhorn's are): the images are fetched from both at once, and
// the result is one that Check and Longhorn's start rule both accept, its
// export equal to the source's.
func TestRebuildFromTwoRemotes(t *testing.T) {
	root := t.TempDir()
	src, twin, dst := filepath.Join(root, "src"), filepath.Join(root, "twin"), filepath.Join(root, "dst")
	head := map[int64]byte{}
	snap := map[int64]byte{}
	for i := int64(0); i < 64; i++ {
		head[i*16384] = byte('a' + i%26)
		snap[i*12288+4096] = byte('A' + i%26)
	}
	lhdir.WriteDir(t, src, 42, head, snap)
	_, err := Rebuild(t.Context(), src, twin, nil) // a second healthy copy
	require.NoError(t, err)

	var mu sync.Mutex
	fetches := map[string]int{}
	serve := func(dir string) string {
		ctx, cancel := context.WithCancel(context.Background())
		srv := &tcpsync.Server{Root: filepath.Dir(dir), NoAuth: true, OnSession: func(ev tcpsync.SessionEvent) {
			if ev.Op == "fetch" && ev.Err == nil {
				mu.Lock()
				fetches[dir]++
				mu.Unlock()
			}
		}}
		addr, wait, err := tcpsync.ServeLoopback(ctx, srv)
		require.NoError(t, err)
		t.Cleanup(func() { cancel(); require.NoError(t, wait()) })
		return addr
	}
	o := &Options{Remote: serve(src), RemoteDir: "src", TCP: tcpsync.Options{NoAuth: true, MaxAttempts: 1},
		MoreRemotes: []tcpsync.MultiSource{{Addr: serve(twin), Remote: "twin"}}}
	st, err := Rebuild(t.Context(), "", dst, o)
	require.NoError(t, err)
	require.Equal(t, PathTCP, st.Path)
	requireSameReplica(t, src, dst)
	require.Equal(t, []string{src, dst}, lhdir.StartCheck(t, []string{src, dst}))
	require.True(t, bytes.Equal(exportBytes(t, src), exportBytes(t, dst)))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 2, fetches[src], "both images fetched with the source taking part")
	require.Equal(t, 2, fetches[twin], "both images fetched with the twin taking part")
}
