package disks_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/scheduler/disks"
)

// TestEveryDecisionReported: what the agent passes over and decides not to
// do is reported, never silent: "0 planned" on a pressured disk came with
// no reason when the disk was given as its mount point (replicas one
// level down) or the planner held the disk.
func TestEveryDecisionReported(t *testing.T) {
	d1 := subdir(t, mount(t, loopfs.Ext4), "replicas")
	d2 := subdir(t, mount(t, loopfs.Ext4), "replicas")
	sums := map[string]string{}
	fill(t, d1, 0, 1, sums)

	t.Run("mount-point-given", func(t *testing.T) {
		mnt := filepath.Dir(d1)
		cfg := disks.Config{Disks: []disks.DiskConfig{
			{Name: "d1", Path: mnt, ReservedBytes: 1 << 40},
			{Name: "d2", Path: d2},
		}, PressurePercent: ptr(90)}
		res, rec, err := runPass(t, t.Context(), cfg)
		require.NoError(t, err)
		require.Empty(t, res.Planned)
		var said bool
		for _, e := range rec.kinds(disks.EventIgnored) {
			require.Equal(t, "d1", e.From)
			if e.Replica == "replicas" {
				require.Contains(t, e.Reason, "it holds 1 replica directory: give the disk as NAME="+d1)
				said = true
			}
		}
		require.True(t, said, "the replicas directory one level down was passed over silently: %+v", rec.events)
		held := rec.kinds(disks.EventHeld)
		require.Len(t, held, 1, "%+v", rec.events)
		require.Equal(t, "d1", held[0].From)
		require.NotEmpty(t, held[0].Reason)
		last := rec.events[len(rec.events)-1]
		require.Equal(t, disks.EventPass, last.Kind)
		require.Contains(t, last.Reason, "2 disks, 0 replicas, 1 under pressure: 0 planned, 0 moved (0 B), 0 failed, 0 skipped, 1 held")
	})

	t.Run("held-no-target", func(t *testing.T) {
		cfg := disks.Config{Disks: []disks.DiskConfig{
			{Name: "d1", Path: d1, ReservedBytes: 1 << 40},
			{Name: "d2", Path: d2, NoScheduling: true},
		}, PressurePercent: ptr(90)}
		res, rec, err := runPass(t, t.Context(), cfg)
		require.NoError(t, err)
		require.Empty(t, res.Planned)
		require.Equal(t, 1, res.Held)
		held := rec.kinds(disks.EventHeld)
		require.Len(t, held, 1)
		require.Equal(t, repName(0), held[0].Replica)
		require.Contains(t, held[0].Reason, "no other disk of the node can take the replica")
	})

	t.Run("interrupted-move-says-so", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		cfg := disks.Config{Disks: []disks.DiskConfig{
			{Name: "d1", Path: d1, ReservedBytes: 1 << 40},
			{Name: "d2", Path: d2},
		}, PressurePercent: ptr(90)}
		disks.SetStepHook(&cfg, func(step string) {
			if step == "copy" {
				cancel()
			}
		})
		res, rec, err := runPass(t, ctx, cfg)
		require.ErrorIs(t, err, context.Canceled)
		require.Len(t, res.Failed, 1)
		failed := rec.kinds(disks.EventMoveFailed)
		require.Len(t, failed, 1)
		require.Contains(t, failed[0].Reason, "interrupted, rolled back: the replica stays on d1")
		last := rec.events[len(rec.events)-1]
		require.Equal(t, disks.EventPass, last.Kind)
		require.Contains(t, last.Reason, "1 failed, 0 skipped, 0 held; interrupted")
		require.Equal(t, map[string]string{repName(0): "d1"}, checkClean(t, cfg, sums))
	})
}
