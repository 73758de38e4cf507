//go:build linux

package tcpsync

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// TestMultiPieceMapsHoldMemoryFixed is issue 26's bound for the
// multi-source pull: with piece maps, its memory does not grow with the
// file's extent count. Files of 25,000 and 100,000 data extents of 1 KiB
// (ext4 with 1 KiB blocks), each pulled from two servers by a client whose
// session budget (8 MiB) could not hold the larger map whole, each copy
// checked against the kernel's SEEK_DATA/SEEK_HOLE map and the source's
// bytes; the live heap (runtime/metrics, a GC every 20 ms) grows as much
// for 4N extents as for N.
func TestMultiPieceMapsHoldMemoryFixed(t *testing.T) {
	if os.Getenv(heavyEnv) == "" {
		t.Skipf("measures the heap of four multi-source pulls with a collection every 20 ms; %s=1 runs it (CI does)", heavyEnv)
	}
	loopfs.NeedRoot(t)
	t.Setenv("TMPDIR", "/dev/shm") // the loop image in memory
	mnt := loopfs.MountWith(t, loopfs.Ext4, 1<<30, "-b", "1024")
	root, local := filepath.Join(mnt, "srv"), filepath.Join(mnt, "local")
	require.NoError(t, os.Mkdir(root, 0o755))
	require.NoError(t, os.Mkdir(local, 0o755))
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	// The client charges no fixed buffers to its budget, only what it
	// receives: 8 MiB holds the smaller map whole, not the larger.
	const budget, clientBudget = 18 << 20, 8 << 20
	mod := func(s *Server) { s.MaxSessionMemory, s.IdleTimeout = budget, 5*time.Minute }
	a, _ := startServer(t, root, mod)
	b, _ := startServer(t, root, mod)
	o := clientOpts()
	o.hooks = &testHooks{sessionMemory: clientBudget}
	o.Compress = CompressNone
	const n = 25_000
	require.Greater(t, int64(4*n)*extentCost, int64(clientBudget), "the larger map whole is over the budget")
	ctx := t.Context()
	const step = 8 << 10
	pull := func(src wideImage, name string) uint64 {
		st, err := Push(ctx, a, src, name, o) // the copy the sources serve
		require.NoError(t, err)
		require.True(t, st.Verified)
		var least uint64 = math.MaxUint64
		for range 2 {
			dst := filepath.Join(local, name)
			stop := liveWatchGC(t)
			ms, err := PullMulti(ctx, []MultiSource{{Addr: a, Remote: name}, {Addr: b, Remote: name}}, dst, o)
			least = min(least, stop())
			require.NoError(t, err)
			require.True(t, ms.Verified)
			requireWide(t, dst, src)
			require.NoError(t, os.Remove(dst))
			_ = os.Remove(dst + sidecarSuffix)
		}
		return least
	}
	small := pull(wideImage{n: n, step: step}, "small.img")
	big := pull(wideImage{n: 4 * n, step: step}, "big.img")
	t.Logf("live heap growth: multi-source pull of %d extents %d KiB, of %d extents %d KiB", n, small>>10, 4*n, big>>10)
	require.Less(t, big, small+windowSlack, "a pull of 4N extents holds the heap of a pull of N")
}
