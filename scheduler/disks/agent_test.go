package disks_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/scheduler/disks"
)

const (
	repSize = 16 * mib
	repData = 12 * mib
)

func repName(i int) string { return fmt.Sprintf("vol%02d-%08x", i, 0xa0+i) }

// fill writes n replicas (numbered from first) into dir.
func fill(t *testing.T, dir string, first, n int, sums map[string]string) {
	t.Helper()
	for i := first; i < first+n; i++ {
		sums[repName(i)] = writeReplica(t, filepath.Join(dir, repName(i)), repSize, repData, uint64(i))
	}
}

// TestPassesBalanceDisks: three disks (ext4, ext4, XFS), two of them
// pressured; one pass moves exactly one replica off each pressured disk,
// repeated passes end with no disk under pressure, no replica moves twice,
// and every replica keeps its content, nothing left behind.
func TestPassesBalanceDisks(t *testing.T) {
	d1 := subdir(t, mount(t, loopfs.Ext4), "replicas")
	d2 := subdir(t, mount(t, loopfs.Ext4), "replicas")
	d3 := subdir(t, mount(t, loopfs.XFS), "replicas")
	sums := map[string]string{}
	fill(t, d1, 0, 6, sums)
	fill(t, d2, 6, 5, sums)
	cfg := disks.Config{
		Disks: []disks.DiskConfig{
			{Name: "d1", Path: d1, ReservedBytes: 100 * mib},
			{Name: "d2", Path: d2, ReservedBytes: 100 * mib},
			{Name: "d3", Path: d3},
		},
		PressurePercent: ptr(70),
	}
	var rec recorder
	cfg.OnEvent = rec.on
	a, err := disks.New(cfg)
	require.NoError(t, err)
	defer a.Close()

	movedBy := map[string][]string{} // replica → disks it left
	var passes [][]disks.Move
	for pass := 1; ; pass++ {
		require.Less(t, pass, 20, "passes do not end")
		res, err := a.Pass(t.Context())
		require.NoError(t, err)
		for _, d := range res.Disks {
			t.Logf("pass %d: %s max %d avail %d reserved %d scheduled %d replicas %d pressured %v",
				pass, d.Name, d.MaxBytes, d.AvailableBytes, d.ReservedBytes, d.ScheduledBytes, d.Replicas, d.Pressured)
		}
		if pass == 1 {
			require.True(t, res.Disks[0].Pressured && res.Disks[1].Pressured && !res.Disks[2].Pressured,
				"setup: d1 and d2 must start under pressure, d3 not")
			// One move off each pressured disk, no more.
			require.Len(t, res.Moved, 2)
			require.ElementsMatch(t, []string{"d1", "d2"}, []string{res.Moved[0].From, res.Moved[1].From})
			require.Len(t, rec.kinds(disks.EventPressure), 2)
			require.Len(t, rec.kinds(disks.EventMoveStart), 2)
		}
		require.Empty(t, res.Failed)
		require.Empty(t, res.Skipped)
		if len(res.Moved) == 0 {
			for _, d := range res.Disks {
				require.False(t, d.Pressured, "pass %d: %s still under pressure with nothing to move", pass, d.Name)
			}
			break
		}
		for _, m := range res.Moved {
			require.NotContains(t, movedBy[m.Replica], m.To, "%s returns to %s: ping-pong", m.Replica, m.To)
			movedBy[m.Replica] = append(movedBy[m.Replica], m.From)
		}
		passes = append(passes, res.Moved)
	}
	require.GreaterOrEqual(t, len(passes), 2, "the setup needs more than one pass")
	for r, left := range movedBy {
		require.Len(t, left, 1, "%s moved more than once: %v", r, left)
	}
	require.Len(t, rec.kinds(disks.EventMoveDone), len(movedBy))
	for _, e := range rec.kinds(disks.EventMoveDone) {
		require.Equal(t, "d3", e.To)
		require.Positive(t, e.Bytes)
	}
	checkClean(t, cfg, sums)
}

// TestReflinkPair: two disks that are directories of one XFS filesystem;
// the move shares the blocks (the filesystem's free space does not drop by
// the replica's data while the copy exists) and the content is kept.
func TestReflinkPair(t *testing.T) {
	mnt := mount(t, loopfs.XFS)
	a1, a2 := subdir(t, mnt, "a"), subdir(t, mnt, "b")
	sums := map[string]string{}
	fill(t, a1, 0, 1, sums)
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(mnt, &st))
	avail := int64(st.Bavail) * int64(st.Bsize)
	cfg := disks.Config{
		Disks: []disks.DiskConfig{
			// The reserve leaves a1 with 5% of the filesystem: pressured.
			{Name: "a1", Path: a1, ReservedBytes: avail - int64(st.Blocks)*int64(st.Bsize)/20},
			{Name: "a2", Path: a2},
		},
		PressurePercent: ptr(90),
	}
	var availCopied int64 = -1
	// The move-start event's progress sampler (what the CLI's bar
	// draws) reads the copy as it grows: nothing before, all after.
	var progress func() (int64, int64)
	var atCopy, atCopied [2]int64
	cfg.OnEvent = func(e disks.Event) {
		if e.Kind == disks.EventMoveStart {
			progress = e.Progress
		}
	}
	disks.SetStepHook(&cfg, func(step string) {
		switch step {
		case "copy":
			atCopy[0], atCopy[1] = progress()
		case "copied":
			atCopied[0], atCopied[1] = progress()
			var s unix.Statfs_t
			require.NoError(t, unix.Statfs(mnt, &s))
			availCopied = int64(s.Bavail) * int64(s.Bsize)
		}
	})
	a, err := disks.New(cfg)
	require.NoError(t, err)
	defer a.Close()
	res, err := a.Pass(t.Context())
	require.NoError(t, err)
	require.Len(t, res.Moved, 1)
	require.Equal(t, disks.Move{Replica: repName(0), Volume: "vol00", From: "a1", To: "a2", Bytes: res.Moved[0].Bytes}, res.Moved[0])
	require.GreaterOrEqual(t, res.Moved[0].Bytes, int64(repData))
	require.Equal(t, [2]int64{0, res.Moved[0].Bytes}, atCopy, "progress before the copy")
	require.Equal(t, res.Moved[0].Bytes, atCopied[1])
	require.GreaterOrEqual(t, atCopied[0], int64(repData), "progress after the copy")
	// Both copies exist at "copied"; a byte copy would have taken 12 MiB.
	require.Positive(t, availCopied)
	t.Logf("free space: %d before, %d with both copies (data %d)", avail, availCopied, repData)
	require.Less(t, avail-availCopied, int64(2*mib), "the copy was not a reflink")
	checkClean(t, cfg, sums)
	_, err = os.Stat(filepath.Join(a2, repName(0)))
	require.NoError(t, err)
}
