package sparse

import (
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

func toRanges(m Map) []layout.Range {
	var out []layout.Range
	for _, e := range m.Extents() {
		out = append(out, layout.Range{Off: e.Off, Len: e.Len})
	}
	return out
}

func openWalker(t testing.TB, path string) *Walker {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	w, err := NewWalker(f)
	require.NoError(t, err)
	return w
}

// TestWalkMatrix walks the standard layouts on ext4, XFS, btrfs and tmpfs and
// checks the walker against a bare SEEK_DATA/SEEK_HOLE loop and against where
// the data was written (rounded to 4 KiB blocks). Nothing is flushed first:
// dirty data must count as data.
func TestWalkMatrix(t *testing.T) {
	loopfs.Run(t, loopfs.DefaultSize, func(t *testing.T, kind loopfs.Kind, dir string) {
		for _, l := range layout.Standard() {
			t.Run(l.Name, func(t *testing.T) {
				path := filepath.Join(dir, l.Name)
				layout.Create(t, path, l)
				w := openWalker(t, path)
				m, err := w.Map(t.Context())
				require.NoError(t, err)
				require.True(t, w.HolesKnown())
				require.Equal(t, l.Size, m.Size())
				require.NoError(t, Validate(m.Size(), m.Extents()))
				require.Equal(t, layout.SeekWalk(t, path), toRanges(m), "walker disagrees with a plain SEEK_DATA/SEEK_HOLE loop")
				require.Equal(t, layout.BlockRanges(l, 4096), toRanges(m), "walker disagrees with where data was written")
				if kind != loopfs.Tmpfs {
					checkFiemapCovers(t, path, m)
				}
				require.NoError(t, os.Remove(path))
			})
		}
	})
}

// checkFiemapCovers asserts FIEMAP reports every data extent, flushing first.
func checkFiemapCovers(t *testing.T, path string, m Map) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Sync())
	var data []Extent
	require.NoError(t, Fiemap(t.Context(), f, 0, m.Size(), func(e FiemapExtent) error {
		if e.Flags&FiemapUnwritten == 0 {
			data = append(data, Extent{e.Logical, min(e.Length, m.Size()-e.Logical)})
		}
		return nil
	}))
	got := mustNewMap(t, m.Size(), data...)
	require.True(t, got.Equal(m), "FIEMAP data %v != SEEK_DATA %v", got, m)
}

func mustNewMap(t testing.TB, size int64, e ...Extent) Map {
	t.Helper()
	m, err := NewMap(size, e...)
	require.NoError(t, err)
	return m
}

func TestWalkRefusesDirectory(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Open(dir)
	require.NoError(t, err)
	defer f.Close()
	_, err = NewWalker(f)
	require.ErrorIs(t, err, syscall.EISDIR)
	var pe *fs.PathError
	require.True(t, errors.As(err, &pe))
	require.Equal(t, dir, pe.Path)
}

func TestWalkCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	layout.Create(t, path, layout.Layout{Size: 1 << 20, Data: layout.Ranges(0, 10)})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := openWalker(t, path).Map(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

func TestWalkStopsOnCallbackError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	layout.Create(t, path, layout.Layout{Size: 1 << 20, Data: layout.Ranges(0, 10, 1<<19, 10)})
	stop := errors.New("stop")
	n := 0
	err := openWalker(t, path).Walk(t.Context(), func(Extent) error { n++; return stop })
	require.Same(t, stop, err)
	require.Equal(t, 1, n)
}

// TestWalkBlockDevice walks a loop device: SEEK_DATA is EINVAL there, so the
// whole device is one data extent, HolesKnown is false, and the size comes
// from BLKGETSIZE64 (st_size is 0).
func TestWalkBlockDevice(t *testing.T) {
	loopfs.NeedRoot(t)
	img := filepath.Join(t.TempDir(), "dev.img")
	const size = 32 << 20
	layout.Create(t, img, layout.Layout{Size: size, Data: layout.Ranges(8<<20, 1<<20)})
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		loopfs.Unavailable(t, "losetup: "+strings.TrimSpace(string(out)))
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	w := openWalker(t, dev)
	require.True(t, w.Info().BlockDevice)
	require.Equal(t, int64(size), w.Size())
	m, err := w.Map(t.Context())
	require.NoError(t, err)
	require.False(t, w.HolesKnown())
	require.Equal(t, []Extent{{0, size}}, m.Extents())
}

// TestWalkTerminatesWhileFileChanges walks a file that another goroutine
// keeps punching and writing: every walk must end, stay within the size and
// return a canonical map.
func TestWalkTerminatesWhileFileChanges(t *testing.T) {
	dir := t.TempDir()
	if loopfs.Required() || os.Geteuid() == 0 {
		dir = loopfs.Mount(t, loopfs.XFS, 1<<30)
	}
	path := filepath.Join(dir, "busy")
	const size = 64 << 20
	layout.Create(t, path, layout.Layout{Size: size, Data: layout.Ranges(0, size)})
	wf, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer wf.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		buf := make([]byte, 4096)
		for ctx.Err() == nil {
			off := rng.Int64N(size/4096) * 4096
			if rng.IntN(2) == 0 {
				unix.Fallocate(int(wf.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, 4096*int64(1+rng.IntN(8)))
			} else {
				wf.WriteAt(buf, off)
			}
		}
	}()
	w := openWalker(t, path)
	for i := 0; i < 50; i++ {
		m, err := w.Map(ctx)
		require.NoError(t, err, "walk %d", i)
		require.NoError(t, Validate(m.Size(), m.Extents()))
	}
	cancel()
	wg.Wait()
}

// TestFiemapShared clones a file on XFS and btrfs and checks FIEMAP reports
// every extent of the clone as shared; tmpfs has no FIEMAP.
func TestFiemapShared(t *testing.T) {
	for _, kind := range []loopfs.Kind{loopfs.XFS, loopfs.Btrfs} {
		t.Run(string(kind), func(t *testing.T) {
			dir := loopfs.Mount(t, kind, 1<<30)
			src := filepath.Join(dir, "src")
			layout.Create(t, src, layout.Layout{Size: 16 << 20, Data: layout.Ranges(0, 1<<20, 4<<20, 1<<20)})
			sf, err := os.Open(src)
			require.NoError(t, err)
			defer sf.Close()
			require.NoError(t, sf.Sync())
			df, err := os.Create(filepath.Join(dir, "dst"))
			require.NoError(t, err)
			defer df.Close()
			require.NoError(t, unix.IoctlFileClone(int(df.Fd()), int(sf.Fd())))
			n := 0
			require.NoError(t, Fiemap(t.Context(), df, 0, 16<<20, func(e FiemapExtent) error {
				n++
				require.NotZero(t, e.Flags&FiemapShared, "extent %+v (%v) not shared", e, e.Flags)
				return nil
			}))
			require.Positive(t, n)
		})
	}
	t.Run("tmpfs", func(t *testing.T) {
		dir := loopfs.Mount(t, loopfs.Tmpfs, 64<<20)
		path := filepath.Join(dir, "f")
		layout.Create(t, path, layout.Layout{Size: 1 << 20, Data: layout.Ranges(0, 10)})
		f, err := os.Open(path)
		require.NoError(t, err)
		defer f.Close()
		err = Fiemap(t.Context(), f, 0, 1<<20, func(FiemapExtent) error { return nil })
		require.ErrorIs(t, err, errors.ErrUnsupported)
	})
}

func TestStatAllocated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	layout.Create(t, path, layout.Layout{Size: 1 << 30, Data: layout.Ranges(1<<30-1, 1)})
	w := openWalker(t, path)
	require.Equal(t, int64(1<<30), w.Info().Size)
	require.Less(t, w.Info().Allocated, int64(1<<20))
	require.True(t, w.Info().Mode.IsRegular())
	require.NotZero(t, w.Info().Ino)
}
