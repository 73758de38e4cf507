package localsync_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/localsync"
	"github.com/sparsesync/sparsesync/qos"
)

// TestBudgetChargesWhatMoves checks that a copy under a budget asks it for
// exactly the bytes it reads and writes: a full copy reads and writes the
// data once, a re-sync reads both sides of the data and writes only the
// changed block, and a clone or an unchanged range costs nothing written.
// The rate itself is qos's to hold (tested there on a simulated clock);
// here the limit is high enough that the test does not wait.
func TestBudgetChargesWhatMoves(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	const size = 16 << 20
	data := []struct{ off, n int64 }{{0, 1 << 20}, {5 << 20, 3 << 20}, {15 << 20, 256 << 10}}
	f, err := os.Create(src)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(size))
	rng := rand.New(rand.NewPCG(1, 2))
	var total int64
	for _, d := range data {
		b := make([]byte, d.n)
		for i := range b {
			b[i] = byte(rng.Uint32() | 1)
		}
		_, err := f.WriteAt(b, d.off)
		require.NoError(t, err)
		total += d.n
	}
	require.NoError(t, f.Close())

	for _, m := range []localsync.Method{localsync.MethodReadWrite, localsync.MethodCopyRange} {
		t.Run(m.String(), func(t *testing.T) {
			os.Remove(dst)
			b := qos.NewBudget(4 << 30)
			st, err := localsync.Copy(t.Context(), src, dst, &localsync.Options{Method: m, Budget: b, NoSync: true})
			require.NoError(t, err)
			checkSame(t, src, dst)
			require.Equal(t, total, st.CopiedBytes)
			require.Equal(t, total, b.Read.Bytes(), "bytes read, as charged")
			require.Equal(t, total, b.Write.Bytes(), "bytes written, as charged")
			require.Zero(t, b.Wire.Bytes())

			// One changed block: both sides of all the data are read, one
			// block is written.
			g, err := os.OpenFile(src, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = g.WriteAt([]byte("changed by "+m.String()), 6<<20)
			require.NoError(t, err)
			require.NoError(t, g.Close())
			b = qos.NewBudget(4 << 30)
			st, err = localsync.Copy(t.Context(), src, dst, &localsync.Options{Method: m, Budget: b, Reflink: localsync.ReflinkNever, NoSync: true})
			require.NoError(t, err)
			checkSame(t, src, dst)
			require.Equal(t, int64(localsync.DefaultBlockSize), st.CopiedBytes, "%+v", st)
			require.Equal(t, 2*total, b.Read.Bytes(), "a re-sync reads both sides")
			require.Equal(t, int64(localsync.DefaultBlockSize), b.Write.Bytes())
		})
	}
}
