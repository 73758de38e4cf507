package localsync_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
)

// TestDestinationPreallocationPunched: an existing destination holds an
// unwritten preallocation (fallocate, as qemu-img's preallocation=falloc
// or a database leaves) where the source has a hole. SEEK_DATA calls it a
// hole and it reads as zeros, but it takes space: the copy is exact to
// the hole only once it is punched. The kernel's st_blocks is the oracle.
// Found by FuzzLocal (testdata seed-dst-prealloc-over-hole) once fuzzing
// ran one option set per input.
func TestDestinationPreallocationPunched(t *testing.T) {
	runAll(t, 1<<30, func(t *testing.T, kind loopfs.Kind, dir string) {
		for _, tc := range []struct {
			name string
			opts localsync.Options
		}{
			{"auto", localsync.Options{}},
			{"readwrite", localsync.Options{Method: localsync.MethodReadWrite}},
			{"atomic", localsync.Options{Atomic: true}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				src, dst := filepath.Join(dir, tc.name+".src"), filepath.Join(dir, tc.name+".dst")
				layout.Create(t, src, layout.Layout{Size: 64 * mib, Data: layout.Ranges(0, 64<<10, 48*mib, 64<<10)})
				layout.Create(t, dst, layout.Layout{Size: 64 * mib, Data: layout.Ranges(0, 64<<10)})
				layout.Preallocate(t, dst, 8*mib, 32*mib)

				st, err := localsync.Copy(t.Context(), src, dst, &tc.opts)
				require.NoError(t, err)
				checkSame(t, src, dst)
				require.Less(t, allocated(t, dst), int64(mib), "the destination's preallocation over the source's hole is punched")
				if !tc.opts.Atomic {
					require.GreaterOrEqual(t, st.PunchedBytes, int64(32*mib), "punched bytes are counted")
				}

				// Nothing is hidden any more: an unchanged re-sync writes nothing.
				st, err = localsync.Copy(t.Context(), src, dst, &localsync.Options{Method: tc.opts.Method})
				require.NoError(t, err)
				require.Zero(t, st.CopiedBytes+st.ClonedBytes+st.PunchedBytes+st.ZeroedBytes, "%+v", st)
			})
		}
	})
}

// TestSourcePreallocationKept: the source's own unwritten preallocation
// goes with a whole-file clone (btrfs copies it), and there the
// destination's is exact: an unchanged re-sync must not punch it (and
// write) on every run.
func TestSourcePreallocationKept(t *testing.T) {
	runAll(t, 1<<30, func(t *testing.T, kind loopfs.Kind, dir string) {
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		layout.Create(t, src, layout.Layout{Size: 8 * mib, Data: layout.Ranges(0, 64<<10)})
		layout.Preallocate(t, src, 2*mib, 4*mib)
		_, err := localsync.Copy(t.Context(), src, dst, nil)
		require.NoError(t, err)
		checkSameBytes(t, src, dst)
		for range 2 {
			st, err := localsync.Copy(t.Context(), src, dst, nil)
			require.NoError(t, err)
			require.Zero(t, st.CopiedBytes+st.ClonedBytes+st.PunchedBytes+st.ZeroedBytes, "an unchanged re-sync writes nothing: %+v", st)
		}
	})
}
