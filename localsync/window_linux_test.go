package localsync_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/localsync"
)

// TestWindowsCutWhereDestinationIsDenser: a re-sync plans a window of each
// file's map at a time, and a window ends sooner where the destination
// holds more extents than the source. Here the source is one extent of
// 40 MiB and a hole of 40 MiB, the destination 10,240 extents of 4 KiB, one
// every 8 KiB, over both: the source's one extent is cut across several
// windows, and the destination's data in the source's hole is punched
// window by window. The copy has the source's hole map and bytes.
func TestWindowsCutWhereDestinationIsDenser(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	const half = 40 << 20
	f, err := os.Create(src)
	require.NoError(t, err)
	b := make([]byte, half)
	for i := range b {
		b[i] = byte(i*7+i>>12) | 1
	}
	_, err = f.WriteAt(b, 0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(2*half))
	require.NoError(t, f.Close())
	g, err := os.Create(dst)
	require.NoError(t, err)
	blk := make([]byte, 4<<10)
	for i := range blk {
		blk[i] = 0xa5
	}
	for off := int64(0); off < 2*half; off += 8 << 10 {
		_, err := g.WriteAt(blk, off)
		require.NoError(t, err)
	}
	require.NoError(t, g.Close())

	st, err := localsync.Copy(t.Context(), src, dst, &localsync.Options{NoSync: true})
	require.NoError(t, err)
	checkSameBytes(t, src, dst)
	require.Equal(t, int64(half), st.DataBytes)
	require.Equal(t, int64(half/2), st.PunchedBytes+st.ZeroedBytes, "the destination's data in the source's hole")
	checkStatsAdd(t, st)
}
