package tcpsync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// TestTargetPreallocationPunched: the target already holds an unwritten
// preallocation (fallocate) where the source has a hole. SEEK_DATA calls
// it a hole and it reads as zeros, so neither side's map shows it, but it
// takes space until the receiver punches it. Pushed and pulled, in place
// and atomic; the kernel's st_blocks is the oracle. Found by FuzzTCP
// (testdata seed-dst-prealloc-over-hole) once fuzzing ran one option set
// per input.
func TestTargetPreallocationPunched(t *testing.T) {
	const mib = 1 << 20
	loopfs.Run(t, 1<<30, func(t *testing.T, kind loopfs.Kind, dir string) {
		root, local := filepath.Join(dir, "root"), filepath.Join(dir, "local")
		require.NoError(t, os.MkdirAll(root, 0o755))
		require.NoError(t, os.MkdirAll(local, 0o755))
		addr, _ := startServer(t, root, nil)
		for _, tc := range []struct {
			name         string
			pull, atomic bool
		}{{"push", false, false}, {"push-atomic", false, true}, {"pull", true, false}, {"pull-atomic", true, true}} {
			t.Run(tc.name, func(t *testing.T) {
				src, dst := filepath.Join(local, tc.name), filepath.Join(root, tc.name)
				if tc.pull {
					src, dst = dst, src
				}
				layout.Create(t, src, layout.Layout{Size: 64 * mib, Data: layout.Ranges(0, 64<<10, 48*mib, 64<<10)})
				layout.Create(t, dst, layout.Layout{Size: 64 * mib, Data: layout.Ranges(0, 64<<10)})
				layout.Preallocate(t, dst, 8*mib, 32*mib)

				o := clientOpts()
				o.Atomic = tc.atomic
				var err error
				if tc.pull {
					_, err = Pull(t.Context(), addr, tc.name, dst, o)
				} else {
					_, err = PushFile(t.Context(), addr, src, tc.name, o)
				}
				require.NoError(t, err)
				requireSame(t, src, dst)
				require.Less(t, layout.Allocated(t, dst), int64(mib), "the target's preallocation over the source's hole is punched")
			})
		}
	})
}
