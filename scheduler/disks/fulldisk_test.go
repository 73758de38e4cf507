package disks_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/loopfs"
	"github.com/sparsesync/sparsesync/scheduler/disks"
)

// fillUp writes path until the filesystem refuses with ENOSPC: 1 MiB
// writes, then 4 KiB ones for the last blocks. As root it also takes ext4's
// reserved blocks, so nothing at all is left.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	require.NoError(t, err)
	defer f.Close()
	for _, n := range []int{mib, 4096} {
		buf := make([]byte, n)
		for {
			if _, err = f.Write(buf); err != nil {
				break
			}
		}
		require.ErrorIs(t, err, unix.ENOSPC)
	}
	require.ErrorIs(t, f.Sync(), nil)
}

// TestFullSourceDisk: the most pressured case. A disk filled to 100% (a
// filler written until ENOSPC, so not even a directory can be created on
// XFS) is relieved by one pass: the replica moves off it, its export
// unchanged, nothing left behind on either disk. Nothing of the move may
// need a byte of the full disk: the record and the copy are on the target,
// and the source is retired by a rename in its own directory.
func TestFullSourceDisk(t *testing.T) {
	for _, kind := range []loopfs.Kind{loopfs.XFS, loopfs.Ext4} {
		t.Run(string(kind), func(t *testing.T) {
			src := subdir(t, mount(t, kind), "replicas")
			dst := subdir(t, mount(t, loopfs.Ext4), "replicas")
			name := repName(0)
			sums := map[string]string{name: writeReplica(t, filepath.Join(src, name), repSize, repData, 1)}
			fillUp(t, filepath.Join(src, "filler"))
			var st unix.Statfs_t
			require.NoError(t, unix.Statfs(src, &st))
			t.Logf("%s source: %d blocks free, %d available", kind, st.Bfree, st.Bavail)
			require.Less(t, int64(st.Bavail)*st.Bsize, int64(64<<10), "the source disk must be full")
			// ext4 may still take a directory block from its metadata
			// reserve; XFS refuses even that.
			probe := filepath.Join(src, ".probe")
			err := os.Mkdir(probe, 0o700)
			t.Logf("%s source: mkdir: %v", kind, err)
			if err == nil {
				require.NoError(t, os.Remove(probe))
			}

			var rec recorder
			cfg := disks.Config{
				Disks:           []disks.DiskConfig{{Name: "full", Path: src}, {Name: "roomy", Path: dst}},
				PressurePercent: ptr(90),
				OnEvent:         rec.on,
			}
			a, err := disks.New(cfg)
			require.NoError(t, err)
			defer a.Close()
			res, err := a.Pass(t.Context())
			require.NoError(t, err)
			require.True(t, res.Disks[0].Pressured)
			require.Empty(t, res.Failed, "events: %+v", rec.events)
			require.Equal(t, []string{name}, movedNames(res.Moved))
			require.Len(t, rec.kinds(disks.EventMoveDone), 1)
			require.Empty(t, rec.kinds(disks.EventMoveDone)[0].Reason)
			require.Equal(t, map[string]string{name: "roomy"}, checkClean(t, cfg, sums))
			// Free blocks, not available ones: root's writes went into
			// ext4's reserve, which the freed blocks refill first.
			freeBefore := int64(st.Bfree) * st.Bsize
			require.NoError(t, unix.Statfs(src, &st))
			require.GreaterOrEqual(t, int64(st.Bfree)*st.Bsize-freeBefore, int64(repData), "the move freed the source")
		})
	}
}
