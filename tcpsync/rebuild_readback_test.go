package tcpsync_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/replica/rebuild"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// TestRebuildLongReadBackStaysAlive is issue 26's acceptance for a TCP
// replica rebuild (read-back on by default): with idle timeouts of 3 s on
// both sides and each read of the rebuilding side's read-back held 0.7 s
// (the volume's 32 MiB of data is 8 reads of 4 MiB: 5.6 s in one session),
// the read-backs last more than three idle timeouts and the rebuild
// succeeds, the rebuilt replica's volume equal to the source's, and no
// session ends with an error on the server. (With 1 s and 0.3 s, 3 runs in
// 10 failed under -race at load 18: a server heard nothing for 1 s.)
func TestRebuildLongReadBackStaysAlive(t *testing.T) {
	t.Parallel() // it waits on slowed storage or a rate: beside the other waiting tests
	const idle = 3 * time.Second
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	r, err := replica.Create(src, 64<<20, nil)
	require.NoError(t, err)
	buf := bytes.Repeat([]byte("sparsesync issue 26 "), 1<<20/20+1)[:1<<20]
	for off := int64(0); off < 64<<20; off += 2 << 20 {
		buf[0] = byte(off >> 20)
		_, err := r.WriteAt(buf, off)
		require.NoError(t, err)
	}
	require.NoError(t, r.Close())

	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var failed []error
	srv := &tcpsync.Server{Root: root, NoAuth: true, IdleTimeout: idle, OnSession: func(ev tcpsync.SessionEvent) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Err != nil {
			failed = append(failed, ev.Err)
		}
	}}
	addr, wait, err := tcpsync.ServeLoopback(ctx, srv)
	require.NoError(t, err)
	t.Cleanup(func() {
		cancel()
		require.NoError(t, wait())
		mu.Lock()
		defer mu.Unlock()
		require.Empty(t, failed, "sessions the server ended with an error")
	})

	o := &rebuild.Options{Remote: addr, RemoteDir: "src",
		TCP: tcpsync.Options{NoAuth: true, MaxAttempts: 1, IdleTimeout: idle}}
	lasted := tcpsync.SlowReadBack(&o.TCP, 700*time.Millisecond)
	st, err := rebuild.Rebuild(t.Context(), "", dst, o)
	require.NoError(t, err)
	t.Logf("TCP rebuild (%s) with read-backs of %v", st.Path, lasted())
	require.Equal(t, rebuild.PathTCP, st.Path)
	require.Greater(t, lasted(), 3*idle, "the read-backs outlasted three idle timeouts")

	export := func(dir string) []byte {
		out := filepath.Join(t.TempDir(), "export.img")
		_, err := replica.Export(t.Context(), dir, out, nil)
		require.NoError(t, err)
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		return b
	}
	require.True(t, bytes.Equal(export(src), export(dst)), "the rebuilt volume differs from the source")
}
