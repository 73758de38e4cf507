package tcpsync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
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

// pushSource pushes path to remote through a FileSource and returns how
// many bytes it read with O_DIRECT.
func pushSource(t *testing.T, addr, path, remote string) int64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fs, err := NewFileSource(f)
	require.NoError(t, err)
	_, err = Push(t.Context(), addr, fs, remote, clientOpts())
	require.NoError(t, err)
	return fs.cold.DirectBytes()
}

// TestColdSourcePush pushes a source none of which is in the page cache:
// its large extents are read with O_DIRECT (internal/coldread), so after
// the push they are still not cached, and the copy is exact. A warm source
// is read through the cache (no direct read).
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

			direct := pushSource(t, addr, src, "img")
			require.Greater(t, direct, l.DataBytes()/2, "a cold source is read directly")
			require.LessOrEqual(t, direct, l.DataBytes())
			require.Less(t, cachedBytes(t, src), l.DataBytes()/10, "a cold source was read through the page cache")
			requireSame(t, src, filepath.Join(root, "img"))

			// requireSame read it: warm now, and pushed warm it is read
			// through the cache. Another process's drop_caches (benchmarks
			// drop the whole machine's cache) can make part of it cold
			// during the push, which then rightly reads it directly: such
			// a round says nothing and is repeated.
			for try := 1; ; try++ {
				warm := cachedBytes(t, src)
				require.Greater(t, warm, l.DataBytes()/2)
				direct := pushSource(t, addr, src, "img2")
				if cachedBytes(t, src) >= warm {
					require.Zero(t, direct, "a warm source is read through the page cache")
					break
				}
				require.Less(t, try, 3, "the page cache was dropped during every warm push")
				requireSame(t, src, filepath.Join(root, "img2"))
			}
			requireSame(t, src, filepath.Join(root, "img2"))
		})
	}
}
