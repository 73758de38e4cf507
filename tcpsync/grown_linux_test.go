package tcpsync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// TestGrownTargetKeepsHoles: a target shorter than the source, with an
// unaligned size, grows to the source's size. Its old last page is then
// allocated although its map (taken before it grows, since the map crosses
// the wire) does not show it all: the partial block past the old end on
// ext4, XFS and tmpfs, and on btrfs zeros written into the page even where
// it was a hole. Where the source has a hole there, the target must have
// one too (internal/destplan's old-last-page rule; found by FuzzTCP, seed
// change-shrink-grow). Pushed and pulled, on every filesystem.
func TestGrownTargetKeepsHoles(t *testing.T) {
	loopfs.Run(t, 1<<30, func(t *testing.T, kind loopfs.Kind, dir string) {
		root, local := filepath.Join(dir, "root"), filepath.Join(dir, "local")
		require.NoError(t, os.MkdirAll(root, 0o755))
		require.NoError(t, os.MkdirAll(local, 0o755))
		addr, _ := startServer(t, root, nil)
		for _, tc := range []struct {
			name string
			pull bool
			dst  layout.Layout
		}{
			{"data-to-old-end/push", false, layout.Layout{Size: 5000, Data: layout.Ranges(0, 5000)}},
			{"data-to-old-end/pull", true, layout.Layout{Size: 5000, Data: layout.Ranges(0, 5000)}},
			{"hole-at-old-end/push", false, layout.Layout{Size: 6000, Data: layout.Ranges(0, 1000)}},
			{"hole-at-old-end/pull", true, layout.Layout{Size: 6000, Data: layout.Ranges(0, 1000)}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				name := filepath.Base(filepath.Dir(tc.name)) + "-" + filepath.Base(tc.name)
				src, dst := filepath.Join(local, name), filepath.Join(root, name)
				if tc.pull {
					src, dst = dst, src
				}
				layout.Create(t, src, layout.Layout{Size: 1 << 20, Data: layout.Ranges(0, 1000, 512<<10, 4096)})
				layout.Create(t, dst, tc.dst)
				var err error
				if tc.pull {
					_, err = Pull(t.Context(), addr, name, dst, clientOpts())
				} else {
					_, err = PushFile(t.Context(), addr, src, name, clientOpts())
				}
				require.NoError(t, err)
				requireSame(t, src, dst)
				require.Equal(t, layout.Ranges(0, 4096, 512<<10, 4096), layout.SeekWalk(t, dst), "the target's data")
			})
		}
	})
}
