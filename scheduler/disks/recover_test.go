package disks_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/scheduler/disks"
)

func TestVolumeOf(t *testing.T) {
	for in, want := range map[string]string{
		"pvc-1234-abcd-0123abcd": "pvc-1234-abcd", // Longhorn: <volume>-<8 lowercase letters or digits>
		"vol-a-zz99zz99":         "vol-a",
		"vol-a-ZZ99ZZ99":         "vol-a-ZZ99ZZ99", // not Longhorn's suffix
		"vol-a-123":              "vol-a-123",
		"-0123abcd":              "-0123abcd",
		"plain":                  "plain",
	} {
		require.Equal(t, want, disks.VolumeOf(in), in)
	}
}

type crashHere struct{}

// killMoveAt runs one pass of an agent on cfg that stops at the move's
// step as a kill would: it unwinds without the rollback.
func killMoveAt(t *testing.T, cfg disks.Config, step string) {
	t.Helper()
	disks.SetStepHook(&cfg, func(s string) {
		if s == step {
			panic(crashHere{})
		}
	})
	a, err := disks.New(cfg)
	require.NoError(t, err)
	func() {
		defer func() { require.Equal(t, crashHere{}, recover()) }()
		a.Pass(t.Context())
	}()
	require.NoError(t, a.Close())
}

// TestRecoveryNeedsBothDisks: a move interrupted before and after the
// source was retired, then starts with one of its two disks missing from
// the configuration. The record lies on the target disk. Killed after the
// retirement: without the target, the retired source on d1 has no record
// and the start is refused; without the source, the record names a disk
// that is not configured and the start is refused; neither touches
// anything. Killed before the retirement: the source is home and
// authoritative, so a start without the target finds nothing to decide on
// d1 and goes on (the record waits on d2). With both disks: rolled back.
func TestRecoveryNeedsBothDisks(t *testing.T) {
	d1 := subdir(t, mount(t, loopfs.Ext4), "r")
	d2 := subdir(t, mount(t, loopfs.Ext4), "r")
	d3 := subdir(t, mount(t, loopfs.Ext4), "r")
	sums := map[string]string{repName(0): writeReplica(t, filepath.Join(d1, repName(0)), 8*mib, 4*mib, 1)}
	full := disks.Config{Disks: []disks.DiskConfig{
		{Name: "d1", Path: d1, ReservedBytes: 1 << 40}, {Name: "d2", Path: d2}, {Name: "d3", Path: d3, NoScheduling: true}}}
	for _, crashAt := range []string{"retired", "copied"} {
		t.Run(crashAt, func(t *testing.T) {
			killMoveAt(t, full, crashAt)
			recs, err := filepath.Glob(filepath.Join(d2, disks.AgentDir, "*", disks.IntentFile))
			require.NoError(t, err)
			require.Len(t, recs, 1, "the record is on the target disk")

			before := snapshotTree(t, d1, d2, d3)
			withoutTarget := disks.Config{Disks: []disks.DiskConfig{full.Disks[0], full.Disks[2]}}
			if crashAt == "retired" {
				_, err = disks.New(withoutTarget)
				require.ErrorIs(t, err, disks.ErrRecovery)
				require.Contains(t, err.Error(), "is the move's target disk configured?")
				require.Contains(t, err.Error(), filepath.Join(d1, disks.AgentDir, disks.RetiredPrefix))
			} else {
				a, err := disks.New(withoutTarget)
				require.NoError(t, err, "the source is home: nothing to decide on d1")
				require.NoError(t, a.Close())
			}
			require.Equal(t, before, snapshotTree(t, d1, d2, d3), "a refused recovery must not touch anything")
			_, err = disks.New(disks.Config{Disks: []disks.DiskConfig{full.Disks[1], full.Disks[2]}})
			require.ErrorIs(t, err, disks.ErrRecovery)
			require.Contains(t, err.Error(), `its source disk "d1" (`+d1+`) is not configured`)
			require.Equal(t, before, snapshotTree(t, d1, d2, d3))

			var rec recorder
			c := full
			c.OnEvent = rec.on
			a, err := disks.New(c)
			require.NoError(t, err)
			require.NoError(t, a.Close())
			require.Len(t, rec.kinds(disks.EventMoveFailed), 1)
			require.Equal(t, map[string]string{repName(0): "d1"}, checkClean(t, full, sums))
		})
	}
}

// TestRecoveryRefusesTwoCopies: a move killed after the source was retired
// (rollback pending) or after the copy was committed (cleanup pending)
// finds the replica at both of the places the step renames between: the
// start refuses with ErrRecovery naming both and removes neither.
func TestRecoveryRefusesTwoCopies(t *testing.T) {
	d1 := subdir(t, mount(t, loopfs.Ext4), "r")
	d2 := subdir(t, mount(t, loopfs.Ext4), "r")
	d3 := subdir(t, mount(t, loopfs.Ext4), "r")
	for _, crashAt := range []string{"retired", "committed"} {
		t.Run(crashAt, func(t *testing.T) {
			empty(t, d1, d2, d3)
			writeReplica(t, filepath.Join(d1, repName(0)), 8*mib, 4*mib, 1)
			full := disks.Config{Disks: []disks.DiskConfig{
				{Name: "d1", Path: d1, ReservedBytes: 1 << 40}, {Name: "d2", Path: d2}, {Name: "d3", Path: d3, NoScheduling: true}}}
			killMoveAt(t, full, crashAt)
			// The second copy: at the source's home (rollback) or at the
			// copy's final name on d2 (cleanup).
			second := filepath.Join(d1, repName(0))
			if crashAt == "committed" {
				second = filepath.Join(d2, repName(0))
			}
			require.NoError(t, os.Mkdir(second, 0o700))
			_, err := disks.New(full)
			require.ErrorIs(t, err, disks.ErrRecovery)
			require.ErrorContains(t, err, "leaving both")
			require.ErrorContains(t, err, second)
			// Both copies are still there (a rollback drops the staged
			// copy first: the retired source is the replica).
			first, err := filepath.Glob(filepath.Join(d1, disks.AgentDir, disks.RetiredPrefix+"*", "volume.meta"))
			if crashAt == "committed" {
				first, err = filepath.Glob(filepath.Join(d2, disks.AgentDir, "*", "new", "volume.meta"))
			}
			require.NoError(t, err)
			require.Len(t, first, 1)
			require.DirExists(t, second)
		})
	}
}
