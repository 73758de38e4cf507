package disks_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/scheduler/disks"
)

// inFlight counts the moves between their "intent" and "cleaned" steps and
// remembers the most at once. With a barrier, the first move to reach its
// copy waits for a second one (or gives up after a long bound, so a broken
// limit fails the test instead of hanging it).
type inFlight struct {
	mu      sync.Mutex
	now     int
	most    int
	copying int
	barrier bool
	arrived chan struct{}
}

func (f *inFlight) step(name string) {
	f.mu.Lock()
	switch name {
	case "intent":
		f.now++
		f.most = max(f.most, f.now)
	case "cleaned":
		f.now--
	case "copy":
		f.copying++
		if f.barrier && f.copying == 2 {
			close(f.arrived)
		}
	}
	wait := f.barrier && name == "copy" && f.copying == 1
	f.mu.Unlock()
	if wait {
		select {
		case <-f.arrived:
		case <-time.After(2 * time.Minute):
		}
	}
}

// twoPressured builds TestPassesBalanceDisks's node: d1 and d2 under
// pressure, d3 free, so a pass plans one move off each of d1 and d2.
func twoPressured(t *testing.T) (disks.Config, map[string]string) {
	d1 := subdir(t, mount(t, loopfs.Ext4), "replicas")
	d2 := subdir(t, mount(t, loopfs.Ext4), "replicas")
	d3 := subdir(t, mount(t, loopfs.Ext4), "replicas")
	sums := map[string]string{}
	fill(t, d1, 0, 6, sums)
	fill(t, d2, 6, 5, sums)
	return disks.Config{
		Disks: []disks.DiskConfig{
			{Name: "d1", Path: d1, ReservedBytes: 100 * mib},
			{Name: "d2", Path: d2, ReservedBytes: 100 * mib},
			{Name: "d3", Path: d3},
		},
		PressurePercent: ptr(70),
	}, sums
}

// TestMovesOneAtATimeByDefault: without MaxConcurrentMoves a pass with two
// planned moves runs them one after the other (Longhorn's default of one
// rebuild per node), and both complete with their content.
func TestMovesOneAtATimeByDefault(t *testing.T) {
	cfg, sums := twoPressured(t)
	var f inFlight
	disks.SetStepHook(&cfg, f.step)
	res, _, err := runPass(t, t.Context(), cfg)
	require.NoError(t, err)
	require.Len(t, res.Moved, 2)
	require.Equal(t, 1, f.most, "two moves ran at once without --max-concurrent-moves")
	checkClean(t, cfg, sums)
}

// TestConcurrentMoves: with MaxConcurrentMoves 2 the two moves of a pass
// run at once (the first waits in its copy until the second is copying
// too), each emits its own start and done, and both replicas keep their
// content; the result lists the moves in plan order.
func TestConcurrentMoves(t *testing.T) {
	cfg, sums := twoPressured(t)
	cfg.MaxConcurrentMoves = 2
	f := inFlight{barrier: true, arrived: make(chan struct{})}
	disks.SetStepHook(&cfg, f.step)
	res, rec, err := runPass(t, t.Context(), cfg)
	require.NoError(t, err)
	require.Len(t, res.Moved, 2)
	require.Equal(t, res.Planned, res.Moved, "moved in plan order")
	require.Equal(t, 2, f.most, "the two moves did not overlap")
	require.Len(t, rec.kinds(disks.EventMoveStart), 2)
	require.Len(t, rec.kinds(disks.EventMoveDone), 2)
	for _, e := range rec.kinds(disks.EventMoveDone) {
		require.Equal(t, "d3", e.To)
	}
	checkClean(t, cfg, sums)
}

// TestConcurrentMovesRange: a negative limit is a configuration error said
// before anything moves.
func TestConcurrentMovesRange(t *testing.T) {
	cfg := disks.Config{Disks: []disks.DiskConfig{{Name: "d1", Path: t.TempDir()}, {Name: "d2", Path: t.TempDir()}},
		MaxConcurrentMoves: -1}
	_, err := disks.New(cfg)
	require.ErrorIs(t, err, disks.ErrOutOfRange)
	require.ErrorContains(t, err, "max concurrent moves -1")
}
