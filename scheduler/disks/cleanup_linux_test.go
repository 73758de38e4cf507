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

const fsImmutableFL = 0x10 // FS_IMMUTABLE_FL, <linux/fs.h>

// setImmutable sets or clears a file's immutable flag (chattr +i / -i):
// not even root may then unlink it, a real fault for the code removing it.
func setImmutable(t testing.TB, path string, on bool) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	rc, err := f.SyscallConn()
	require.NoError(t, err)
	var ioErr error
	require.NoError(t, rc.Control(func(fd uintptr) {
		var flags uint32
		if flags, ioErr = unix.IoctlGetUint32(int(fd), unix.FS_IOC_GETFLAGS); ioErr != nil {
			return
		}
		if on {
			flags |= fsImmutableFL
		} else {
			flags &^= fsImmutableFL
		}
		ioErr = unix.IoctlSetPointerInt(int(fd), unix.FS_IOC_SETFLAGS, int(flags))
	}))
	require.NoError(t, ioErr)
}

// TestCleanupFailsAfterCommit: a fault in the cleanup after the commit (the
// retired source cannot be removed: one of its files is immutable) does not
// make the move a failure. The replica lives on its target: the event is
// move-done with a reason saying the next start completes the cleanup, and
// the move counts in Moved and CleanupPending, not in Failed. With the
// fault gone, the next start finishes the cleanup and nothing is left.
func TestCleanupFailsAfterCommit(t *testing.T) {
	d1 := subdir(t, mount(t, loopfs.Ext4), "replicas")
	d2 := subdir(t, mount(t, loopfs.Ext4), "replicas")
	name := repName(0)
	sums := map[string]string{name: writeReplica(t, filepath.Join(d1, name), repSize, repData, 1)}
	cfg := disks.Config{
		Disks:           []disks.DiskConfig{{Name: "d1", Path: d1, ReservedBytes: 1 << 40}, {Name: "d2", Path: d2}},
		PressurePercent: ptr(90),
	}
	faulty := cfg
	var pinned string
	t.Cleanup(func() {
		if pinned != "" {
			setImmutable(t, pinned, false) // or the loop filesystem cannot be cleaned
		}
	})
	disks.SetStepHook(&faulty, func(step string) {
		if step != "committed" {
			return
		}
		m, err := filepath.Glob(filepath.Join(d1, disks.AgentDir, disks.RetiredPrefix+"*", "volume.meta"))
		require.NoError(t, err)
		require.Len(t, m, 1, "the retired source")
		pinned = m[0]
		setImmutable(t, pinned, true)
	})
	var rec recorder
	faulty.OnEvent = rec.on
	a, err := disks.New(faulty)
	require.NoError(t, err)
	res, err := a.Pass(t.Context())
	require.NoError(t, err)
	require.NoError(t, a.Close())
	require.NotEmpty(t, pinned, "the fault was injected")

	require.Empty(t, res.Failed)
	require.Empty(t, rec.kinds(disks.EventMoveFailed), "after the commit a move is never reported failed")
	require.Equal(t, []string{name}, movedNames(res.Moved))
	require.Equal(t, []string{name}, movedNames(res.CleanupPending))
	require.Equal(t, res.Moved[0].Bytes, res.BytesMoved)
	done := rec.kinds(disks.EventMoveDone)
	require.Len(t, done, 1)
	require.Equal(t, "d2", done[0].To)
	require.Contains(t, done[0].Reason, "the next start completes it")
	require.Contains(t, done[0].Reason, "operation not permitted")
	// The replica lives on d2, intact, and only there as far as Longhorn
	// can see; the retired source waits on d1 under its hidden name.
	require.Equal(t, sums[name], exportSum(t, filepath.Join(d2, name)))
	require.Equal(t, map[string][]string{name: {"d2"}}, longhornVisible(t, map[string]string{"d1": d1, "d2": d2}))

	// The next start, the fault gone, completes the cleanup.
	setImmutable(t, pinned, false)
	pinned = ""
	var rec2 recorder
	cfg.OnEvent = rec2.on
	a, err = disks.New(cfg)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	require.Len(t, rec2.events, 1)
	require.Equal(t, disks.EventMoveDone, rec2.events[0].Kind)
	require.Contains(t, rec2.events[0].Reason, "completed at start")
	require.Equal(t, map[string]string{name: "d2"}, checkClean(t, cfg, sums))
}
