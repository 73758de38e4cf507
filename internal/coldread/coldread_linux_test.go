package coldread

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

func TestAlignedBuffer(t *testing.T) {
	for _, n := range []int{1, 4095, 4096, 1 << 20, 1<<20 + 1} {
		b := AlignedBuffer(n)
		require.Len(t, b, n)
		require.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(b)))%Align)
		require.Equal(t, (n+Align-1)/Align*Align, cap(b))
	}
}

// TestReadAt reads a cold file on ext4: long aligned reads go direct and
// return the file's bytes (also the short last block); short, unaligned or
// cached reads go through the page cache and return the same bytes.
func TestReadAt(t *testing.T) {
	dir := loopfs.Mount(t, loopfs.Ext4, 1<<30)
	path := filepath.Join(dir, "f")
	data := make([]byte, 4<<20+1234)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	require.NoError(t, os.WriteFile(path, data, 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Sync())
	require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	c := New(f)
	require.NotNil(t, c)

	buf := AlignedBuffer(1 << 20)
	n, err := c.ReadAt(f, buf, 1<<20)
	require.NoError(t, err)
	require.Equal(t, 1<<20, n)
	require.True(t, bytes.Equal(data[1<<20:2<<20], buf))
	require.Equal(t, int64(1<<20), c.DirectBytes(), "a cold aligned read goes direct")

	// The last MiB and the partial block after it: the direct read rounds
	// up past the end of the file and returns only what is there.
	tail := AlignedBuffer(1<<20 + 1234)
	n, err = c.ReadAt(f, tail, 3<<20)
	require.NoError(t, err)
	require.Equal(t, len(tail), n)
	require.True(t, bytes.Equal(data[3<<20:], tail))
	require.Equal(t, int64(2<<20+1234), c.DirectBytes())

	// Unaligned offset, short read, and a cached range: buffered.
	for _, tc := range []struct{ off, n int64 }{{4097, 1 << 20}, {0, 4096}, {1 << 20, 1 << 20}} {
		b := AlignedBuffer(int(tc.n))
		before := c.DirectBytes()
		if tc.off == 1<<20 {
			_, err := f.ReadAt(make([]byte, 4096), tc.off) // cache one page of it
			require.NoError(t, err)
		}
		n, err := c.ReadAt(f, b, tc.off)
		require.NoError(t, err)
		require.Equal(t, int(tc.n), n)
		require.True(t, bytes.Equal(data[tc.off:tc.off+tc.n], b))
		require.Equal(t, before, c.DirectBytes(), "read %d+%d went direct", tc.off, tc.n)
	}

	// A nil Reader reads through the cache.
	var none *Reader
	n, err = none.ReadAt(f, buf, 0)
	require.NoError(t, err)
	require.Equal(t, len(buf), n)
	require.Zero(t, none.DirectBytes())
}

// TestOpenDirect reopens a file on ext4 with O_DIRECT, after it was
// unlinked: the new descriptor is the same inode, reads into an aligned
// buffer return the file's bytes, and a closed file is an error.
func TestOpenDirect(t *testing.T) {
	dir := loopfs.Mount(t, loopfs.Ext4, 1<<30)
	path := filepath.Join(dir, "f")
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	require.NoError(t, os.WriteFile(path, data, 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, os.Remove(path))

	d, err := OpenDirect(f)
	require.NoError(t, err)
	defer d.Close()
	var want, got unix.Stat_t
	require.NoError(t, unix.Fstat(int(f.Fd()), &want))
	require.NoError(t, unix.Fstat(int(d.Fd()), &got))
	require.Equal(t, want.Ino, got.Ino)
	fl, err := unix.FcntlInt(d.Fd(), unix.F_GETFL, 0)
	require.NoError(t, err)
	require.NotZero(t, fl&unix.O_DIRECT, "the new descriptor is O_DIRECT")

	buf := AlignedBuffer(len(data))
	n, err := d.ReadAt(buf, 0)
	require.NoError(t, err)
	require.Equal(t, len(data), n)
	require.True(t, bytes.Equal(data, buf))
	// O_DIRECT refuses a buffer that is not aligned in memory.
	_, err = d.ReadAt(AlignedBuffer(2 * Align)[1:Align+1], 0)
	require.ErrorIs(t, err, unix.EINVAL)

	closed, err := os.Open(dir)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	_, err = OpenDirect(closed)
	require.Error(t, err)
}
