package localsync_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
)

// heavyEnv runs the heaviest layouts (100,000 extents) on every filesystem
// when set to 1; without it they run on tmpfs only and the loop filesystems
// get 10,000 extents (the same batching and merging paths), which keeps
// go test ./localsync within a few minutes. Set it for a full run (CI).
const heavyEnv = "SPARSESYNC_HEAVY"

// acceptanceLayouts are the layouts except the dense 3 GiB file,
// which has its own test, for one filesystem kind.
func acceptanceLayouts(kind loopfs.Kind) []layout.Layout {
	ls := append(layout.Standard(), scattered("10pct-scattered-512MiB", 512*mib, 10, 7))
	return layout.OnLoop(ls, kind != loopfs.Tmpfs)
}

// TestCopyLayouts copies every layout on every filesystem into a new file,
// checks bytes, hole map and allocation, then re-syncs the unchanged copy
// and checks that nothing was written.
func TestCopyLayouts(t *testing.T) {
	runAll(t, loopfs.DefaultSize, func(t *testing.T, kind loopfs.Kind, dir string) {
		for _, l := range acceptanceLayouts(kind) {
			t.Run(l.Name, func(t *testing.T) {
				src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
				layout.Create(t, src, l)
				t.Cleanup(func() { os.Remove(src); os.Remove(dst) })
				st, err := localsync.Copy(t.Context(), src, dst, nil)
				require.NoError(t, err)
				checkSame(t, src, dst)
				checkStatsAdd(t, st)
				require.Equal(t, l.Size, st.Size)
				require.Equal(t, st.DataBytes, st.ClonedBytes+st.CopiedBytes, "full copy: %+v", st)
				if kind.Reflink() && st.DataBytes > 0 {
					require.Equal(t, localsync.MethodReflink, st.Method)
				}
				if !kind.Reflink() && st.DataBytes > 0 {
					// Thousands of small extents 4 KiB apart are read a
					// run at a time and written extent by extent.
					want := localsync.MethodCopyRange
					if len(l.Data) >= 10_000 {
						want = localsync.MethodReadWrite
					}
					require.Equal(t, want, st.Method)
				}
				fi, err := os.Stat(dst)
				require.NoError(t, err)
				require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())

				st, err = localsync.Copy(t.Context(), src, dst, nil)
				require.NoError(t, err)
				checkSame(t, src, dst)
				checkStatsAdd(t, st)
				require.Zero(t, st.ClonedBytes+st.CopiedBytes+st.PunchedBytes+st.ZeroedBytes, "unchanged re-sync wrote: %+v", st)
				require.Equal(t, st.DataBytes, st.UnchangedBytes)
				require.Equal(t, localsync.MethodAuto, st.Method)
			})
		}
	})
}

// TestDenseAndLargerDestination copies a dense 3 GiB file (copy_file_range
// rounds above 2 GiB), then syncs a 1 GiB source onto 3 GiB destinations
// full of data in every --reflink mode: the result is exactly 1 GiB and
// identical. ReflinkAlways on a filesystem without reflink is refused
// before the destination is touched.
func TestDenseAndLargerDestination(t *testing.T) {
	runAll(t, 10*gib, func(t *testing.T, kind loopfs.Kind, dir string) {
		if (kind == loopfs.Ext4 || kind == loopfs.Btrfs) && !layout.Heavy() {
			// 4 GiB written on each: tmpfs and XFS (reflink) cover the
			// same paths in a third of the time.
			t.Skipf("2 GiB dense copies on %s: %s=1 runs them (CI does)", kind, layout.HeavyEnv)
		}
		a, b := filepath.Join(dir, "dense-a"), filepath.Join(dir, "dense-b")
		// Over copy_file_range's 2 GiB per call (internal/kcopy), so one
		// extent takes several calls.
		const dense = 2*gib + 64*mib
		writeDense(t, a, dense)
		st, err := localsync.Copy(t.Context(), a, b, &localsync.Options{NoSync: kind == loopfs.Tmpfs})
		require.NoError(t, err)
		checkSame(t, a, b)
		require.Equal(t, dense, st.ClonedBytes+st.CopiedBytes)

		small := filepath.Join(dir, "small")
		layout.Create(t, small, scattered("small", gib, 10, 3))
		dsts := map[localsync.ReflinkMode]string{localsync.ReflinkNever: b, localsync.ReflinkAuto: a}
		if kind.Reflink() {
			c := filepath.Join(dir, "dense-c")
			cloneFile(t, b, c)
			dsts[localsync.ReflinkAlways] = c
		} else {
			before := layout.SeekWalk(t, b)
			_, err := localsync.Copy(t.Context(), small, b, &localsync.Options{Reflink: localsync.ReflinkAlways})
			require.ErrorIs(t, err, localsync.ErrReflinkUnsupported)
			fi, err := os.Stat(b)
			require.NoError(t, err)
			require.Equal(t, dense, fi.Size(), "refused reflink must not touch the destination")
			require.Equal(t, before, layout.SeekWalk(t, b))
		}
		for mode, dst := range dsts {
			st, err := localsync.Copy(t.Context(), small, dst, &localsync.Options{Reflink: mode})
			require.NoError(t, err, "reflink %s", mode)
			// No allocation bound and no hole-map equality here: rewriting
			// blocks that the old destination shared (XFS, reflink never)
			// leaves XFS CoW-fork preallocation that its background GC frees
			// later and that SEEK_DATA shows as data while cached. The bytes
			// must still be identical everywhere, holes reading as zeros.
			checkIdentical(t, small, dst)
			checkStatsAdd(t, st)
			require.Equal(t, gib, st.Size)
			if mode == localsync.ReflinkNever {
				require.Zero(t, st.ClonedBytes)
			}
			require.NoError(t, os.Remove(dst))
		}
	})
}

// writeDense writes size bytes of data quickly: one pattern buffer, with
// each 4 KiB block stamped with its offset so misplaced data is caught.
func writeDense(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Truncate(size))
	buf := make([]byte, 4*mib)
	layout.Pattern(buf, 0)
	for off := int64(0); off < size; off += int64(len(buf)) {
		for p := 0; p < len(buf); p += 4096 {
			binary.LittleEndian.PutUint64(buf[p:], uint64(off+int64(p))|1<<63)
		}
		_, err := f.WriteAt(buf[:min(int64(len(buf)), size-off)], off)
		require.NoError(t, err)
	}
}

func cloneFile(t *testing.T, from, to string) {
	t.Helper()
	s, err := os.Open(from)
	require.NoError(t, err)
	defer s.Close()
	d, err := os.Create(to)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, unix.IoctlFileClone(int(d.Fd()), int(s.Fd())))
}
