package tcpsync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/layout"
	"github.com/sparsesync/sparsesync/internal/loopfs"
)

// cachedBytes is how much of path is in the page cache (cachestat(2)).
func cachedBytes(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var st unix.Cachestat_t
	if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &st, 0); err != nil {
		t.Skipf("no cachestat: %v", err)
	}
	return int64(st.Cache) * int64(os.Getpagesize())
}

// TestColdSourcePush pushes a source none of which is in the page cache:
// its large extents are read with O_DIRECT (internal/coldread), so after
// the push they are still not cached, and the copy is exact. A warm source
// stays warm.
func TestColdSourcePush(t *testing.T) {
	for _, kind := range []loopfs.Kind{loopfs.Ext4, loopfs.XFS} {
		t.Run(string(kind), func(t *testing.T) {
			dir := loopfs.Mount(t, kind, 1<<30)
			root := filepath.Join(dir, "root")
			require.NoError(t, os.MkdirAll(root, 0o755))
			addr, _ := startServer(t, root, nil)
			src := filepath.Join(dir, "src")
			l := layout.Layout{Name: "cold", Size: 64 << 20, Data: layout.Ranges(0, 8<<20, 16<<20, 12<<20, 40<<20, 4<<20)}
			layout.Create(t, src, l)
			f, err := os.Open(src)
			require.NoError(t, err)
			require.NoError(t, f.Sync())
			require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
			f.Close()
			require.Less(t, cachedBytes(t, src), int64(1<<20), "the source is cold before the push")

			_, err = PushFile(t.Context(), addr, src, "img", clientOpts())
			require.NoError(t, err)
			require.Less(t, cachedBytes(t, src), l.DataBytes()/10, "a cold source was read through the page cache")
			requireSame(t, src, filepath.Join(root, "img"))

			// requireSame read it: warm now, and pushed warm it stays cached.
			warm := cachedBytes(t, src)
			require.Greater(t, warm, l.DataBytes()/2)
			_, err = PushFile(t.Context(), addr, src, "img2", clientOpts())
			require.NoError(t, err)
			require.GreaterOrEqual(t, cachedBytes(t, src), warm)
			requireSame(t, src, filepath.Join(root, "img2"))
		})
	}
}
