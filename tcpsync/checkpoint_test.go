package tcpsync

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
)

// TestCheckpointsCountData: a receiver checkpoints (fdatasync, sidecar
// fsync) every CheckpointBytes of data it works, however far apart in the
// file that data lies. The image is 1 GiB with three 16 MiB extents
// (three chunks) 400 MiB apart. With a budget above its 48 MiB of data a
// push makes no checkpoint before its commit; one that counted file
// offsets made one per chunk after the first. With a budget of 8 MiB it
// makes one per chunk (16 MiB of data each): a resume still loses at most
// a budget's worth of data, and a chunk.
func TestCheckpointsCountData(t *testing.T) {
	src := writeLayout(t, t.TempDir(), "img", layout.Layout{Name: "far", Size: 1 << 30,
		Data: layout.Ranges(0, 16<<20, 400<<20, 16<<20, 800<<20, 16<<20)})
	for _, tc := range []struct {
		budget int64
		want   int32
	}{{64 << 20, 0}, {8 << 20, 3}} {
		root := t.TempDir()
		var n atomic.Int32
		addr, _ := startServer(t, root, func(s *Server) {
			s.CheckpointBytes, s.CheckpointInterval = tc.budget, time.Hour
			s.hooks = &testHooks{beforeCheckpoint: func(*os.File, int64) { n.Add(1) }}
		})
		_, err := PushFile(t.Context(), addr, src, "dst", clientOpts())
		require.NoError(t, err)
		require.Equal(t, tc.want, n.Load(), "checkpoints with a budget of %d MiB", tc.budget>>20)
		requireSame(t, src, filepath.Join(root, "dst"))
	}
}
