package bench_test

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/bench"
)

// TestOptionsNilAndValidate: nil GenOptions and WriteBenchOptions mean the
// defaults, and a field that cannot be used is refused with
// ErrInvalidOptions before any file is made.
func TestOptionsNilAndValidate(t *testing.T) {
	w, err := bench.WorkloadNamed("dense")
	require.NoError(t, err)
	require.Equal(t, w.Size, w.ScaledSize(nil), "nil: scale 1")
	require.Equal(t, w.ScaledSize(&bench.GenOptions{}), w.ScaledSize(nil))
	require.Equal(t, w.Size/2, w.ScaledSize(&bench.GenOptions{Scale: 0.5}))

	dir := t.TempDir()
	for _, g := range []*bench.GenOptions{{Scale: -1}, {Scale: math.NaN()}, {Scale: math.Inf(1)}} {
		p := filepath.Join(dir, "w.img")
		require.ErrorIs(t, w.Generate(t.Context(), p, g), bench.ErrInvalidOptions, "scale %v", g.Scale)
		require.NoFileExists(t, p)
		require.ErrorIs(t, w.Check(t.Context(), g), bench.ErrInvalidOptions)
	}
	for _, o := range []*bench.WriteBenchOptions{{Size: -1}, {QueueDepth: -1}, {Duration: -time.Second}} {
		rdir := filepath.Join(dir, "replica")
		_, err := bench.WriteBench(t.Context(), rdir, o)
		require.ErrorIs(t, err, bench.ErrInvalidOptions, "%+v", o)
		require.NoDirExists(t, rdir)
	}
}
