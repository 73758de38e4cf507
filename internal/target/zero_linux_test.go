package target

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/sparse"
)

// TestZeroAtEndOfFile: a hole reaching the end of an unaligned file frees
// its last block and never changes the size.
func TestZeroAtEndOfFile(t *testing.T) {
	loopfs.NeedRoot(t)
	dir := loopfs.Mount(t, loopfs.Ext4, 64<<20) // 1 KiB blocks: smaller than the 4 KiB rounding
	var sfs unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &sfs))
	bs := sfs.Bsize
	tf, err := Create(filepath.Join(dir, "f"), nil)
	require.NoError(t, err)
	const size = 3*4096 + 100
	require.NoError(t, tf.SetSize(size))
	data := make([]byte, size)
	for i := range data {
		data[i] = 0xa5
	}
	_, err = tf.WriteAt(data, 0)
	require.NoError(t, err)
	require.NoError(t, tf.Sync())
	punched, err := tf.Zero(4096+10, size-4096-10)
	require.NoError(t, err)
	require.True(t, punched)
	info, err := sparse.Stat(tf.OS())
	require.NoError(t, err)
	require.Equal(t, int64(size), info.Size)
	require.Equal(t, (4096+10+bs-1)/bs*bs, info.Allocated, "the blocks up to the hole stay, all after it are freed")
	require.NoError(t, tf.Commit(false))
	got, err := os.ReadFile(filepath.Join(dir, "f"))
	require.NoError(t, err)
	require.Equal(t, data[:4096+10], got[:4096+10])
	require.Equal(t, make([]byte, size-4096-10), got[4096+10:])
}
