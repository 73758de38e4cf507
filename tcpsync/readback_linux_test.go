package tcpsync

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/sparse"
)

// TestReadBackBypassesPageCache corrupts a block of the pulled target on
// the block device itself (ext4 on a loop device, written with O_DIRECT
// at the block's physical address from FIEMAP), after the final fdatasync:
// the file's page cache still holds the good bytes, so only a read that
// bypasses it can see the damage. The read-back does, and the pull ends
// with ErrVerify and an incomplete target.
func TestReadBackBypassesPageCache(t *testing.T) {
	mnt, dev := ext4OnLoop(t)

	root := t.TempDir()
	addr, _ := startServer(t, root, nil)
	require.NoError(t, writeImage(filepath.Join(root, "img"), 32<<20, 0.5, 4, 11))
	m, _, err := sparse.ReadMap(t.Context(), filepath.Join(root, "img"))
	require.NoError(t, err)
	at := nonZeroBlock(t, filepath.Join(root, "img"), m)
	dst := filepath.Join(mnt, "dst")

	corrupted := 0
	var hookErr error
	o := clientOpts()
	o.ReadBack = ReadBackOn
	o.hooks = &testHooks{beforeFinalCheck: func(f *os.File) {
		// Runs on the receiver's goroutine: report, never FailNow.
		if hookErr == nil {
			hookErr = corruptOnDevice(t, f, dev, at)
		}
		if hookErr == nil {
			corrupted++
		}
	}}
	_, err = Pull(t.Context(), addr, "img", dst, o)
	require.NoError(t, hookErr)
	require.ErrorIs(t, err, ErrVerify)
	require.Positive(t, corrupted)
	require.Equal(t, stateIncomplete, readSidecar(t, dst).State)
}

// TestMultiReadBackBypassesPageCache is TestReadBackBypassesPageCache
// for a pull from several sources, with and without piece maps: the block
// is changed on the device under the page cache, and the read-back must
// read it from storage.
func TestMultiReadBackBypassesPageCache(t *testing.T) {
	mnt, dev := ext4OnLoop(t)

	root := t.TempDir()
	a, _ := startServer(t, root, nil)
	b, _ := startServer(t, root, nil)
	require.NoError(t, writeImage(filepath.Join(root, "disk.img"), 32<<20, 0.5, 4, 11))
	m, _, err := sparse.ReadMap(t.Context(), filepath.Join(root, "disk.img"))
	require.NoError(t, err)
	at := nonZeroBlock(t, filepath.Join(root, "disk.img"), m)

	for _, maps := range []bool{true, false} {
		dst := filepath.Join(mnt, fmt.Sprint("dst-", maps))
		corrupted := 0
		var hookErr error
		o := patientOpts()
		o.ReadBack = ReadBackOn
		o.hooks = &testHooks{noWindows: !maps, beforeFinalCheck: func(f *os.File) {
			if hookErr == nil {
				hookErr = corruptOnDevice(t, f, dev, at)
			}
			if hookErr == nil {
				corrupted++
			}
		}}
		_, err = PullMulti(t.Context(), sourcesOf(a, b), dst, o)
		require.NoError(t, hookErr)
		require.ErrorIs(t, err, ErrVerify, "piece maps %v", maps)
		require.Positive(t, corrupted)
		require.Equal(t, stateIncomplete, readSidecar(t, dst).State)
	}
}

// ext4OnLoop mounts an ext4 loop filesystem (root only) and returns its
// mount point and block device.
func ext4OnLoop(t *testing.T) (mnt, dev string) {
	loopfs.NeedRoot(t)
	mnt = loopfs.Mount(t, loopfs.Ext4, 1<<30)
	out, err := exec.Command("findmnt", "-n", "-o", "SOURCE", "--target", mnt).Output()
	require.NoError(t, err)
	dev = strings.TrimSpace(string(out))
	require.True(t, strings.HasPrefix(dev, "/dev/"), "device of %s: %q", mnt, dev)
	return mnt, dev
}

// nonZeroBlock returns the offset of the first 4 KiB block of m's data
// that is not all zeros (zero blocks become holes in the target).
func nonZeroBlock(t *testing.T, path string, m sparse.Map) int64 {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for e := range m.RoundIn(4096).Blocks(4096) {
		if !sparse.IsZero(b[e.Off : e.Off+4096]) {
			return e.Off
		}
	}
	t.Fatal("no data block")
	return 0
}

// corruptOnDevice overwrites the 4 KiB block of f at off on the block
// device dev itself, with O_DIRECT at its physical address, and checks
// that a cached read of f still returns the old bytes.
func corruptOnDevice(t *testing.T, f *os.File, dev string, off int64) error {
	good := make([]byte, 4096)
	if _, err := f.ReadAt(good, off); err != nil {
		return err
	}
	var phys int64 = -1
	if err := sparse.Fiemap(t.Context(), f, off, 4096, func(e sparse.FiemapExtent) error {
		if e.Logical <= off && off < e.Logical+e.Length && e.Physical > 0 {
			phys = e.Physical + off - e.Logical
		}
		return nil
	}); err != nil {
		return err
	}
	if phys < 0 {
		return fmt.Errorf("no physical address for offset %d", off)
	}
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	raw := make([]byte, 8192)
	buf := raw[(4096-uintptr(unsafe.Pointer(&raw[0]))%4096)%4096:][:4096]
	for i := range buf {
		buf[i] = good[i] ^ 0xff
	}
	if _, err := unix.Pwrite(fd, buf, phys); err != nil {
		return err
	}
	again := make([]byte, 4096)
	if _, err := f.ReadAt(again, off); err != nil {
		return err
	}
	if !bytes.Equal(good, again) {
		return fmt.Errorf("the write to the device reached the page cache")
	}
	return nil
}
