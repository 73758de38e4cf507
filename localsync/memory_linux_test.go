package localsync_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/heapwatch"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
)

// TestWindowsHoldMemoryFixed: a copy holds a window of each file's map at a
// time, whatever the extent count. Files of 25,000 and 100,000 data
// extents of 1 KiB, one every 8 KiB (each in a page of its own), on ext4
// with 1 KiB blocks, are copied in full and then re-synced against a
// destination with every extent changed (both maps walked, every extent
// compared and written); each copy is checked against the kernel's
// SEEK_DATA/SEEK_HOLE map and byte for byte. The live heap
// (runtime/metrics, a collection every 20 ms) grows as much for 4N extents
// as for N in the full copy: with the whole maps held it grew by 10 MiB
// more. The re-sync's growth is logged, not bounded: its 16 workers' 32 MiB
// of buffers vary by more between runs (1-1.5 MiB) than the whole maps
// added there (1 MiB).
func TestWindowsHoldMemoryFixed(t *testing.T) {
	if os.Getenv(heavyEnv) == "" {
		t.Skipf("measures the heap of eight copies with a collection every 20 ms; %s=1 runs it (CI does)", heavyEnv)
	}
	loopfs.NeedRoot(t)
	t.Setenv("TMPDIR", "/dev/shm") // the loop image in memory: 250,000 writes of 1 KiB
	mnt := loopfs.MountWith(t, loopfs.Ext4, 1<<30, "-b", "1024")
	const n, step = 25_000, 8 << 10
	copyTwice := func(count int) (full, resync uint64) {
		src, dst := filepath.Join(mnt, "src"), filepath.Join(mnt, "dst")
		writeEvery(t, src, count, step, 1)
		full, resync = math.MaxUint64, math.MaxUint64
		// Each copy twice, the smaller growth kept: what other goroutines
		// allocate meanwhile only adds to one measurement.
		for range 2 {
			require.NoError(t, os.Remove(dst))
			stop := heapwatch.LiveGC(t)
			_, err := localsync.Copy(t.Context(), src, dst, &localsync.Options{NoSync: true})
			full = min(full, stop())
			require.NoError(t, err)
			checkSameBytes(t, src, dst)

			writeEvery(t, dst, count, step, 2) // every extent differs
			stop = heapwatch.LiveGC(t)
			st, err := localsync.Copy(t.Context(), src, dst, &localsync.Options{NoSync: true})
			resync = min(resync, stop())
			require.NoError(t, err)
			require.Equal(t, int64(count)<<10, st.CopiedBytes)
			checkSameBytes(t, src, dst)
		}
		require.NoError(t, os.Remove(src))
		return full, resync
	}
	writeEvery(t, filepath.Join(mnt, "dst"), 1, step, 0)
	full, resync := copyTwice(n)
	fullBig, resyncBig := copyTwice(4 * n)
	t.Logf("live heap growth: copy of %d extents %d KiB, of %d extents %d KiB; re-sync %d KiB and %d KiB",
		n, full>>10, 4*n, fullBig>>10, resync>>10, resyncBig>>10)
	require.Less(t, fullBig, full+windowSlack, "a copy of 4N extents holds the heap of a copy of N")
}

// windowSlack is how much more heap a copy of 4N extents may take than one
// of N: the collector's timing, not the maps (held whole, the maps of the
// 4N copy took 4.7 to 10 MiB more than those of N).
const windowSlack = 2 << 20

// writeEvery makes path a file of count extents of 1 KiB, one every step
// bytes, filled with bytes from seed, and ends it with a hole of step.
func writeEvery(t *testing.T, path string, count int, step int64, seed byte) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1<<10)
	for i := range count {
		for j := range b {
			b[j] = byte(i+j) | seed<<6 | 1
		}
		_, err := f.WriteAt(b, int64(i)*step)
		require.NoError(t, err)
	}
	require.NoError(t, f.Truncate(int64(count)*step))
}

// TestWideLocalCopy is issue 26's scale test for local: a file of
// 1,100,000 data extents of 1 KiB, one every 2 KiB (more than an older
// tcpsync peer's map limit of 1,048,576), on ext4 with 1 KiB blocks, is
// copied whole and then re-synced with one extent changed. Each copy has
// the source's hole map (a plain SEEK_DATA/SEEK_HOLE walk) and bytes, and
// the live heap grows by far less than the source's map alone would take
// (1.1 million extents of 16 bytes: 17 MiB; held whole, a copy held both
// maps and the plan, 115 MB of RSS at this count).
func TestWideLocalCopy(t *testing.T) {
	if os.Getenv(heavyEnv) == "" {
		t.Skipf("copies 1.1 million extents twice (minutes under load); %s=1 runs it (CI does)", heavyEnv)
	}
	loopfs.NeedRoot(t)
	mnt := loopfs.MountWith(t, loopfs.Ext4, 4<<30, "-b", "1024")
	const n, step = 1_100_000, 2 << 10
	src, dst := filepath.Join(mnt, "src"), filepath.Join(mnt, "dst")
	writeEvery(t, src, n, step, 1)

	stop := heapwatch.LiveGC(t)
	st, err := localsync.Copy(t.Context(), src, dst, &localsync.Options{NoSync: true})
	grew := stop()
	require.NoError(t, err)
	require.Equal(t, int64(n)<<10, st.DataBytes)
	checkSameBytes(t, src, dst)
	t.Logf("copy of %d extents: live heap grew %d KiB", n, grew>>10)
	require.Less(t, grew, uint64(8<<20), "the copy holds a window of the maps, not the maps")

	f, err := os.OpenFile(src, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("changed"), int64(n-10)*step+100)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	st, err = localsync.Copy(t.Context(), src, dst, &localsync.Options{NoSync: true})
	require.NoError(t, err)
	require.Positive(t, st.CopiedBytes)
	require.LessOrEqual(t, st.CopiedBytes, int64(4096), "only the changed extent is written")
	require.Equal(t, int64(n)<<10, st.CopiedBytes+st.UnchangedBytes)
	checkSameBytes(t, src, dst)
}
