package disks_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/loopfs"
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

// TestRecoveryNeedsTargetDisk: a move interrupted after the copy, then a
// start without the move's target disk configured: refused, nothing
// touched; with it configured: rolled back.
func TestRecoveryNeedsTargetDisk(t *testing.T) {
	d1 := subdir(t, mount(t, loopfs.Ext4), "r")
	d2 := subdir(t, mount(t, loopfs.Ext4), "r")
	d3 := subdir(t, mount(t, loopfs.Ext4), "r")
	sums := map[string]string{repName(0): writeReplica(t, filepath.Join(d1, repName(0)), 8*mib, 4*mib, 1)}
	full := disks.Config{Disks: []disks.DiskConfig{
		{Name: "d1", Path: d1, ReservedBytes: 1 << 40}, {Name: "d2", Path: d2}, {Name: "d3", Path: d3, NoScheduling: true}}}
	cfg := full
	disks.SetStepHook(&cfg, func(step string) {
		if step == "copied" {
			panic(crashHere{}) // unwinds without the rollback, as a kill would leave it
		}
	})
	a, err := disks.New(cfg)
	require.NoError(t, err)
	func() {
		defer func() { require.Equal(t, crashHere{}, recover()) }()
		a.Pass(t.Context())
	}()
	require.NoError(t, a.Close())

	before := snapshotTree(t, d1, d2, d3)
	_, err = disks.New(disks.Config{Disks: []disks.DiskConfig{full.Disks[0], full.Disks[2]}})
	require.ErrorIs(t, err, disks.ErrRecovery)
	require.Contains(t, err.Error(), `its target disk "d2" (`+d2+`) is not configured`)
	require.Equal(t, before, snapshotTree(t, d1, d2, d3), "a refused recovery must not touch anything")
	// Without the source disk, d2's half of the move has no record.
	_, err = disks.New(disks.Config{Disks: []disks.DiskConfig{full.Disks[1], full.Disks[2]}})
	require.ErrorIs(t, err, disks.ErrRecovery)
	require.Contains(t, err.Error(), "is the move's source disk configured?")
	require.Equal(t, before, snapshotTree(t, d1, d2, d3))

	var rec recorder
	full.OnEvent = rec.on
	a, err = disks.New(full)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	require.Len(t, rec.kinds(disks.EventMoveFailed), 1)
	require.Equal(t, map[string]string{repName(0): "d1"}, checkClean(t, full, sums))
}
