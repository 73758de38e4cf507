package rebuild

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/qos"
	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// TestAddReplicaTCPFallbackDefaults: AddReplica's TCP fallback gets the
// same defaults as Rebuild's TCP path: every pull is read back
// (tcpsync.ReadBackOn when TCP.ReadBack is left at auto) and Options.Budget
// is charged for the network copy when TCP.Budget is left zero.
func TestAddReplicaTCPFallbackDefaults(t *testing.T) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "r0"), filepath.Join(root, "r1")}
	v, err := replica.CreateVolume(dirs, 8<<20, &replica.VolumeOptions{Counter: replica.CounterOn})
	require.NoError(t, err)
	defer v.Close()
	_, err = v.WriteAt([]byte("data before the snapshot"), 1<<20)
	require.NoError(t, err)
	require.NoError(t, v.Snapshot("base", nil))

	addr, pulls := servePulls(t, root)
	b := qos.NewBudget(8 << 30)
	o := &Options{Remote: addr, TCP: tcpsync.Options{NoAuth: true, MaxAttempts: 1}, Budget: b,
		fault: func(step, name string) error {
			if step == "local" {
				return errors.New("injected local copy failure")
			}
			return nil
		}}
	st, err := AddReplica(t.Context(), v, filepath.Join(root, "r2"), o)
	require.NoError(t, err)
	require.Equal(t, PathLocalTCP, st.Path)
	require.NotEmpty(t, st.Files)
	require.Equal(t, tcpsync.ReadBackAuto, o.TCP.ReadBack, "the caller's options are not changed")
	for _, ev := range pulls(len(st.Files)) {
		require.True(t, ev.Stats.ReadBack, "pull of %s read back", ev.Path)
	}
	require.Positive(t, b.Wire.Bytes(), "the network copy is charged to Options.Budget")
}
