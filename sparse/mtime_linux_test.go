package sparse

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// TestSettleMtimeMovesOnTheNextWrite: once SettleMtime returns, a write at
// once (in the same clock tick, where timestamps are coarse) gives the file
// another mtime, so a mark that records it sees the write. On ramfs, whose
// timestamps are the coarse clock's, two writes in a row almost always
// share one; on the test's temporary directory (multigrain on Linux 6.13
// and later) the kernel moves it by itself. SettleMtime's own change is a
// nudge back of at most a timestamp granule, and the file's bytes stay.
func TestSettleMtimeMovesOnTheNextWrite(t *testing.T) {
	dirs := map[string]string{"tempdir": t.TempDir()}
	if os.Geteuid() == 0 {
		dirs["ramfs"] = loopfs.CoarseTimes(t)
	} else {
		t.Log("ramfs (coarse timestamps) needs root: only the temporary directory is tested")
	}
	for name, dir := range dirs {
		t.Run(name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(dir, "f"))
			require.NoError(t, err)
			defer f.Close()
			for round := range 200 {
				_, err := f.WriteAt([]byte{byte(round)}, int64(round))
				require.NoError(t, err)
				before, err := Stat(f)
				require.NoError(t, err)
				settled, err := SettleMtime(t.Context(), f)
				require.NoError(t, err)
				require.False(t, settled.ModTime.After(before.ModTime), "round %d: mtime moved forward", round)
				require.LessOrEqual(t, before.ModTime.Sub(settled.ModTime), time.Second, "round %d", round)
				now, err := Stat(f)
				require.NoError(t, err)
				require.True(t, now.ModTime.Equal(settled.ModTime), "round %d: SettleMtime returned %v, the file has %v", round, settled.ModTime, now.ModTime)

				_, err = f.WriteAt([]byte{0xFF}, int64(round)+1)
				require.NoError(t, err)
				after, err := Stat(f)
				require.NoError(t, err)
				require.False(t, after.ModTime.Equal(settled.ModTime), "round %d: a write right after kept the settled mtime %v", round, settled.ModTime)
			}
			b, err := os.ReadFile(f.Name())
			require.NoError(t, err)
			for i := range 200 {
				require.Equal(t, byte(i), b[i], "byte %d", i)
			}
		})
	}
}
