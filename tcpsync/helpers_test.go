package tcpsync

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/sparse"
)

var testToken = []byte("0123456789abcdef0123456789abcdef-test-token")

// startServer runs a Server on 127.0.0.1 for the test's lifetime.
func startServer(t testing.TB, root string, mod func(*Server)) (string, *Server) {
	t.Helper()
	srv := &Server{Root: root, Token: testToken, FailDelay: 10 * time.Millisecond}
	if mod != nil {
		mod(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(20 * time.Second):
			t.Error("server did not shut down")
		}
	})
	return ln.Addr().String(), srv
}

func clientOpts() *Options {
	return &Options{Token: testToken, MaxAttempts: 1, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
}

// requireSame checks that dst has src's size and bytes, and that dst holds
// no data where src has a whole hole block (holes preserved).
func requireSame(t testing.TB, src, dst string) {
	t.Helper()
	sm, si, err := sparse.ReadMap(t.Context(), src)
	require.NoError(t, err)
	dm, di, err := sparse.ReadMap(t.Context(), dst)
	require.NoError(t, err)
	require.Equal(t, si.Size, di.Size, "size of %s", dst)
	extra := dm.Difference(sm.RoundOut(4096))
	require.Zero(t, extra.Bytes(), "%s has data where %s has holes: %v", dst, src, extra)
	sf, err := os.Open(src)
	require.NoError(t, err)
	defer sf.Close()
	df, err := os.Open(dst)
	require.NoError(t, err)
	defer df.Close()
	a, b := make([]byte, 1<<20), make([]byte, 1<<20)
	for _, e := range sm.Union(dm).Extents() {
		for off := e.Off; off < e.End(); {
			n := min(e.End()-off, int64(len(a)))
			_, err1 := sf.ReadAt(a[:n], off)
			_, err2 := df.ReadAt(b[:n], off)
			require.True(t, err1 == nil || err1 == io.EOF)
			require.True(t, err2 == nil || err2 == io.EOF)
			if !bytes.Equal(a[:n], b[:n]) {
				for i := range n {
					if a[i] != b[i] {
						t.Fatalf("%s differs from %s at byte %d", dst, src, off+i)
					}
				}
			}
			off += n
		}
	}
}

// mutate overwrites n random 4 KiB blocks inside the file's data with new
// random bytes.
func mutate(t testing.TB, path string, n int, seed uint64) {
	t.Helper()
	m, _, err := sparse.ReadMap(t.Context(), path)
	require.NoError(t, err)
	blocks := m.RoundIn(4096)
	var offs []int64
	for e := range blocks.Blocks(4096) {
		if e.Len == 4096 {
			offs = append(offs, e.Off)
		}
	}
	require.NotEmpty(t, offs)
	r := rand.New(rand.NewPCG(seed, 1))
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 4096)
	for range n {
		for i := range buf {
			buf[i] = byte(r.Uint32()) | 1
		}
		_, err := f.WriteAt(buf, offs[r.IntN(len(offs))])
		require.NoError(t, err)
	}
}

func writeLayout(t testing.TB, dir, name string, l layout.Layout) string {
	t.Helper()
	p := filepath.Join(dir, name)
	layout.Create(t, p, l)
	return p
}
