package replica

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/sparse"
)

// TestChainWalkIsTheLayersUnion: the volume's map, as ChainReader.Map and
// WalkExtents resolve it while walking (no layer's map held), is the union
// of every layer's SEEK_DATA map rounded out to blocks, and WalkExtents
// from any offset gives that map from there, the first extent clipped, no
// two extents touching (what tcpsync's windows need of an ExtentWalker).
func TestChainWalkIsTheLayersUnion(t *testing.T) {
	dir := t.TempDir()
	const size = 8 << 20
	r, err := Create(dir, size, nil)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 4))
	for layer := range 3 {
		for range 300 {
			off := rng.Int64N(size - 3*BlockSize)
			b := make([]byte, 1+rng.IntN(3*BlockSize))
			for i := range b {
				b[i] = byte(layer + 1)
			}
			_, err := r.WriteAt(b, off)
			require.NoError(t, err)
		}
		if layer < 2 {
			require.NoError(t, r.Snapshot("s"+string(rune('a'+layer)), nil))
		}
	}
	require.NoError(t, r.Close())

	c, err := OpenChain(dir)
	require.NoError(t, err)
	defer c.Close()
	require.Len(t, c.Chain(), 3)
	want, err := sparse.NewMap(size)
	require.NoError(t, err)
	for _, img := range c.Chain() {
		m, _, err := sparse.ReadMap(t.Context(), filepath.Join(dir, img))
		require.NoError(t, err)
		want = want.Union(m.Resize(size).RoundOut(BlockSize))
	}
	got, err := c.Map(t.Context())
	require.NoError(t, err)
	require.Equal(t, want.Extents(), got.Extents())
	require.Greater(t, got.Len(), 100)

	for _, from := range []int64{0, 1, BlockSize - 1, size / 3, size/2 + 5, size - 1, size} {
		var walked []sparse.Extent
		require.NoError(t, c.WalkExtents(t.Context(), from, func(e sparse.Extent) error {
			walked = append(walked, e)
			return nil
		}))
		var expect []sparse.Extent
		for _, e := range want.Extents() {
			if e.End() > from {
				if e.Off < from {
					e = sparse.Extent{Off: from, Len: e.End() - from}
				}
				expect = append(expect, e)
			}
		}
		require.Equal(t, expect, walked, "from %d", from)
	}
}
