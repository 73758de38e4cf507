package disks_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
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
// XFS) is relieved by one pass: a replica moves off it, its export
// unchanged, nothing left behind on either disk. Nothing of the move may
// need a byte of the full disk: the record and the copy are on the target,
// and the source is retired by a rename into the agent directory, which
// the agent made when it first started (before the disk filled up) and
// which is nearly empty. The Longhorn-named case is the one a rename
// within the disk directory itself fails: XFS keeps a small directory in
// its inode, and a full disk cannot give it a block when a long new name
// no longer fits there. An agent that first starts on an already full XFS
// disk cannot make its directory there: the move fails before copying
// anything and the replica stays, intact.
func TestFullSourceDisk(t *testing.T) {
	longhornNames := []string{ // <volume pvc-UUID>-<8 chars>
		"pvc-0b7c1f2e-4a5d-4c3b-9e8f-1a2b3c4d5e61-a1b2c3d1",
		"pvc-0b7c1f2e-4a5d-4c3b-9e8f-1a2b3c4d5e62-a1b2c3d2",
		"pvc-0b7c1f2e-4a5d-4c3b-9e8f-1a2b3c4d5e63-a1b2c3d3",
	}
	for _, tc := range []struct {
		name       string
		kind       loopfs.Kind
		replicas   []string
		firstStart bool // the agent first starts when the disk is full
	}{
		{"xfs", loopfs.XFS, []string{repName(0)}, false},
		{"xfs-longhorn-names", loopfs.XFS, longhornNames, false},
		{"ext4", loopfs.Ext4, []string{repName(0)}, false},
		{"xfs-first-start-when-full", loopfs.XFS, longhornNames, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := subdir(t, mount(t, tc.kind), "replicas")
			dst := subdir(t, mount(t, loopfs.Ext4), "replicas")
			sums := map[string]string{}
			for i, name := range tc.replicas {
				sums[name] = writeReplica(t, filepath.Join(src, name), repSize, 8*mib, uint64(i))
			}
			var rec recorder
			cfg := disks.Config{
				Disks:           []disks.DiskConfig{{Name: "full", Path: src}, {Name: "roomy", Path: dst}},
				PressurePercent: ptr(90),
				OnEvent:         rec.on,
			}
			if !tc.firstStart {
				a, err := disks.New(cfg) // the agent was running before the disk filled up
				require.NoError(t, err)
				require.NoError(t, a.Close())
			}
			fillUp(t, filepath.Join(src, "filler"))
			var st unix.Statfs_t
			require.NoError(t, unix.Statfs(src, &st))
			t.Logf("%s source: %d blocks free, %d available", tc.kind, st.Bfree, st.Bavail)
			require.Less(t, int64(st.Bavail)*int64(st.Bsize), int64(64<<10), "the source disk must be full")
			// ext4 may still take a directory block from its metadata
			// reserve; XFS refuses even that.
			probe := filepath.Join(src, ".probe")
			err := os.Mkdir(probe, 0o700)
			t.Logf("%s source: mkdir: %v", tc.kind, err)
			if err == nil {
				require.NoError(t, os.Remove(probe))
			}

			a, err := disks.New(cfg)
			require.NoError(t, err)
			defer a.Close()
			res, err := a.Pass(t.Context())
			require.NoError(t, err)
			require.True(t, res.Disks[0].Pressured)
			first := tc.replicas[0] // the planner takes the first by name
			if tc.firstStart {
				require.Empty(t, res.Moved)
				require.Len(t, rec.kinds(disks.EventMoveFailed), 1)
				require.Contains(t, rec.kinds(disks.EventMoveFailed)[0].Reason, "no agent directory on the source disk")
				want := map[string]string{}
				for _, name := range tc.replicas {
					want[name] = "full"
				}
				require.Equal(t, want, checkClean(t, cfg, sums))
				return
			}
			require.Empty(t, res.Failed, "events: %+v", rec.events)
			require.Equal(t, []string{first}, movedNames(res.Moved))
			require.Len(t, rec.kinds(disks.EventMoveDone), 1)
			require.Empty(t, rec.kinds(disks.EventMoveDone)[0].Reason)
			want := map[string]string{first: "roomy"}
			for _, name := range tc.replicas[1:] {
				want[name] = "full"
			}
			require.Equal(t, want, checkClean(t, cfg, sums))
			// Free blocks, not available ones: root's writes went into
			// ext4's reserve, which the freed blocks refill first.
			freeBefore := int64(st.Bfree) * int64(st.Bsize)
			require.NoError(t, unix.Statfs(src, &st))
			require.GreaterOrEqual(t, int64(st.Bfree)*int64(st.Bsize)-freeBefore, int64(8*mib), "the move freed the source")
		})
	}
}
