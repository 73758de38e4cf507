package localsync

// Internal tests (package localsync) so they can swap the syscall hooks.

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/sparse"
)

const mib = int64(1) << 20

// calls counts the fast-path syscalls that copies made with its options
// make, through internal/target's Faults (a seam with no rule only counts).
type calls struct{ f *target.Faults }

func recordCalls(*testing.T) calls { return calls{target.NewFaults()} }

// opts returns o (nil: the defaults) with the counter installed.
func (c calls) opts(o *Options) *Options {
	var x Options
	if o != nil {
		x = *o
	}
	x.faults = c.f
	return &x
}

func (c calls) ficlone() int64      { return int64(c.f.Calls(target.OpClone)) }
func (c calls) ficloneRange() int64 { return int64(c.f.Calls(target.OpCloneRange)) }
func (c calls) cfr() int64          { return int64(c.f.Calls(target.OpCopyRange)) }

func sum(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

// checkCopy asserts equal size, hole map and bytes.
func checkCopy(t *testing.T, src, dst string) {
	t.Helper()
	require.Equal(t, layout.SeekWalk(t, src), layout.SeekWalk(t, dst))
	require.Equal(t, sum(t, src), sum(t, dst))
}

var sample = layout.Layout{Name: "sample", Size: 64*mib + 123, Data: layout.Ranges(0, mib, 5*mib, 3*mib, 20*mib, 256<<10, 64*mib-8192, 8192+123)}

// TestCrossFilesystem copies between different filesystems, where FICLONE
// and copy_file_range fail with EXDEV and the copy must fall back to
// read/write.
func TestCrossFilesystem(t *testing.T) {
	pairs := [][2]loopfs.Kind{{loopfs.Ext4, loopfs.XFS}, {loopfs.Tmpfs, loopfs.Ext4}, {loopfs.XFS, loopfs.Btrfs}}
	for _, p := range pairs {
		t.Run(string(p[0])+"-to-"+string(p[1]), func(t *testing.T) {
			a, b := loopfs.Mount(t, p[0], gib), loopfs.Mount(t, p[1], gib)
			src, dst := filepath.Join(a, "src"), filepath.Join(b, "dst")
			layout.Create(t, src, sample)
			c := recordCalls(t)
			st, err := Copy(t.Context(), src, dst, c.opts(nil))
			require.NoError(t, err)
			checkCopy(t, src, dst)
			require.Equal(t, MethodReadWrite, st.Method)
			require.Equal(t, sample.DataBytes(), st.CopiedBytes)
			if p[1].Reflink() {
				require.Equal(t, int64(1), c.ficlone(), "FICLONE tried once")
			}
			require.Equal(t, int64(1), c.cfr(), "copy_file_range tried once, then dropped")
			// Re-sync across filesystems: nothing to write.
			st, err = Copy(t.Context(), src, dst, nil)
			require.NoError(t, err)
			require.Zero(t, st.CopiedBytes+st.ClonedBytes)
		})
	}
}

const gib = int64(1) << 30

// TestReflinkShares checks on XFS and btrfs that a copy shares every
// destination extent with the source, by whole-file FICLONE for a new file
// and by FICLONERANGE per range when the destination already has data.
func TestReflinkShares(t *testing.T) {
	for _, kind := range []loopfs.Kind{loopfs.XFS, loopfs.Btrfs} {
		t.Run(string(kind), func(t *testing.T) {
			dir := loopfs.Mount(t, kind, gib)
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			layout.Create(t, src, sample)
			c := recordCalls(t)
			st, err := Copy(t.Context(), src, dst, c.opts(&Options{Reflink: ReflinkAlways}))
			require.NoError(t, err)
			require.Equal(t, int64(1), c.ficlone())
			require.Zero(t, c.cfr())
			require.Equal(t, MethodReflink, st.Method)
			checkCopy(t, src, dst)
			requireAllShared(t, dst)

			// An existing destination with other data: per-range clones.
			require.NoError(t, os.Remove(dst))
			layout.Create(t, dst, layout.Layout{Size: sample.Size, Data: layout.Ranges(0, 2*mib)})
			f, err := os.OpenFile(dst, os.O_RDWR, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(bytes.Repeat([]byte{7}, 2*int(mib)), 0)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			st, err = Copy(t.Context(), src, dst, c.opts(nil))
			require.NoError(t, err)
			checkCopy(t, src, dst)
			require.Equal(t, MethodReflink, st.Method)
			require.Positive(t, c.ficloneRange())
			require.Equal(t, int64(1), c.ficlone())
			requireAllShared(t, dst)
		})
	}
}

func requireAllShared(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Sync())
	n := 0
	require.NoError(t, sparse.Fiemap(t.Context(), f, 0, 1<<62, func(e sparse.FiemapExtent) error {
		n++
		if e.Flags&sparse.FiemapShared == 0 {
			return errors.New("extent " + e.Extent().String() + " not shared: " + e.Flags.String())
		}
		return nil
	}))
	require.Positive(t, n)
}

// TestFallbackRules injects errnos into the fast paths: "cannot" errnos
// fall back while nothing was written; real errors and "cannot" after data
// stop the copy; a first copy_file_range returning 0 falls back.
func TestFallbackRules(t *testing.T) {
	dir := loopfs.Mount(t, loopfs.XFS, gib)
	src := filepath.Join(dir, "src")
	layout.Create(t, src, sample)
	// clone fails both reflinks with errno, as a filesystem without them.
	clone := func(errno error) []target.Fault {
		return []target.Fault{{Op: target.OpClone, Err: errno}, {Op: target.OpCloneRange, Err: errno}}
	}
	noClone := clone(unix.EXDEV)
	cfr := func(f ...target.Fault) []target.Fault {
		for i := range f {
			f[i].Op = target.OpCopyRange
		}
		return append(append([]target.Fault(nil), noClone...), f...)
	}
	// firstShort lets the first copy_file_range copy 4 KiB for real: data
	// has moved when the next call fails.
	firstShort := target.Fault{N: 1, Short: 4096}
	cases := []struct {
		name      string
		faults    []target.Fault
		method    Method
		wantErr   error
		wantNoDst bool
	}{
		{name: "exdev-clone", faults: clone(unix.EXDEV), method: MethodCopyRange},
		{name: "eopnotsupp-clone", faults: clone(unix.EOPNOTSUPP), method: MethodCopyRange},
		{name: "enospc-clone-is-fatal", faults: []target.Fault{{Op: target.OpClone, Err: unix.ENOSPC}}, wantErr: syscall.ENOSPC, wantNoDst: true},
		{name: "eio-clone-is-fatal", faults: []target.Fault{{Op: target.OpClone, Err: unix.EIO}}, wantErr: syscall.EIO, wantNoDst: true},
		{name: "cfr-einval", faults: cfr(target.Fault{Err: unix.EINVAL}), method: MethodReadWrite},
		// io.EOF: the call copies 0 bytes.
		{name: "cfr-zero-first", faults: cfr(target.Fault{Err: io.EOF}), method: MethodReadWrite},
		// EIO before any data: "not handled" as in internal/poll (FUSE, NFS).
		{name: "cfr-eio-first-falls-back", faults: cfr(target.Fault{Err: unix.EIO}), method: MethodReadWrite},
		{name: "cfr-eio-after-data", faults: cfr(firstShort, target.Fault{Err: unix.EIO}), wantErr: ErrMethodFailed, wantNoDst: true},
		{name: "cfr-enospc-is-fatal", faults: cfr(target.Fault{Err: unix.ENOSPC}), wantErr: syscall.ENOSPC, wantNoDst: true},
		// The first and the third call are interrupted.
		{name: "cfr-eintr-retried", faults: cfr(target.Fault{N: 1, Err: unix.EINTR}, target.Fault{N: 2, Err: unix.EINTR}), method: MethodCopyRange},
		{name: "cfr-einval-after-data", faults: cfr(firstShort, target.Fault{Err: unix.EINVAL}), wantErr: ErrMethodFailed, wantNoDst: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(dir, "dst-"+tc.name)
			faults := target.NewFaults(tc.faults...)
			st, err := Copy(t.Context(), src, dst, &Options{faults: faults})
			require.Positive(t, faults.Hits(), "no fault reached a system call")
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Contains(t, err.Error(), dst)
				if tc.wantNoDst {
					require.NoFileExists(t, dst, "a failed copy into a new file removes it")
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.method, st.Method)
			checkCopy(t, src, dst)
		})
	}
}

// TestMethodForced runs each forced method on XFS and checks it alone ran.
func TestMethodForced(t *testing.T) {
	dir := loopfs.Mount(t, loopfs.XFS, gib)
	src := filepath.Join(dir, "src")
	layout.Create(t, src, sample)
	for _, m := range []Method{MethodReflink, MethodCopyRange, MethodReadWrite} {
		t.Run(m.String(), func(t *testing.T) {
			dst := filepath.Join(dir, "dst-"+m.String())
			c := recordCalls(t)
			st, err := Copy(t.Context(), src, dst, c.opts(&Options{Method: m}))
			require.NoError(t, err)
			checkCopy(t, src, dst)
			require.Equal(t, m, st.Method)
			require.Equal(t, m == MethodReflink, c.ficlone() > 0)
			require.Equal(t, m == MethodCopyRange, c.cfr() > 0)
		})
	}
	dir2 := loopfs.Mount(t, loopfs.Ext4, gib)
	_, err := Copy(t.Context(), src, filepath.Join(dir2, "x"), &Options{Method: MethodReflink})
	require.ErrorIs(t, err, ErrReflinkUnsupported)
	require.NoFileExists(t, filepath.Join(dir2, "x"))
	_, err = Copy(t.Context(), src, filepath.Join(dir2, "y"), &Options{Method: MethodCopyRange})
	require.ErrorIs(t, err, errors.ErrUnsupported)
	require.NoFileExists(t, filepath.Join(dir2, "y"))
}

// TestRefusals: nothing is written and the data stays intact.
func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	layout.Create(t, src, sample)
	want := sum(t, src)
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Link(src, link))
	sym := filepath.Join(dir, "sym")
	require.NoError(t, os.Symlink(src, sym))
	cases := []struct {
		name, src, dst string
		want           error
	}{
		{"same-file", src, src, ErrSameFile},
		{"hard-link", src, link, ErrSameFile},
		{"symlink", src, sym, ErrSameFile},
		{"source-missing", filepath.Join(dir, "nope"), filepath.Join(dir, "out1"), fs.ErrNotExist},
		{"source-directory", dir, filepath.Join(dir, "out2"), syscall.EISDIR},
		{"destination-directory-missing", src, filepath.Join(dir, "no", "dir", "out"), fs.ErrNotExist},
		{"destination-is-directory", src, t.TempDir(), syscall.EISDIR},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, atomicMode := range []bool{false, true} {
				_, err := Copy(t.Context(), tc.src, tc.dst, &Options{Atomic: atomicMode})
				if tc.name == "destination-is-directory" {
					require.Error(t, err)
				} else {
					require.ErrorIs(t, err, tc.want)
				}
				require.NotContains(t, err.Error(), "\n")
				require.Equal(t, want, sum(t, src))
				require.Equal(t, want, sum(t, link))
				require.NoFileExists(t, filepath.Join(dir, "out1"))
				require.NoFileExists(t, filepath.Join(dir, "out2"))
			}
		})
	}
	// Open-file variant.
	f, err := os.Open(src)
	require.NoError(t, err)
	defer f.Close()
	g, err := os.OpenFile(link, os.O_RDWR, 0)
	require.NoError(t, err)
	defer g.Close()
	_, err = CopyFile(t.Context(), f, g, nil)
	require.ErrorIs(t, err, ErrSameFile)
	require.Equal(t, want, sum(t, src))
}

// TestNoSpace copies 300 MiB onto a 256 MiB filesystem: a clear ENOSPC
// error, the source unchanged, the partial new file removed, and in atomic
// mode the old destination intact.
func TestNoSpace(t *testing.T) {
	big := loopfs.Mount(t, loopfs.Tmpfs, gib)
	small := loopfs.Mount(t, loopfs.Ext4, 256*mib)
	src := filepath.Join(big, "src")
	layout.Create(t, src, layout.Layout{Name: "300m", Size: 300 * mib, Data: layout.Ranges(0, 300*mib)})
	want := sum(t, src)
	for _, m := range []Method{MethodAuto, MethodReadWrite} {
		dst := filepath.Join(small, "dst")
		_, err := Copy(t.Context(), src, dst, &Options{Method: m})
		require.ErrorIs(t, err, syscall.ENOSPC)
		require.Contains(t, err.Error(), dst)
		require.NoFileExists(t, dst)
		require.Equal(t, want, sum(t, src))
	}
	old := filepath.Join(small, "old")
	layout.Create(t, old, layout.Layout{Size: 10 * mib, Data: layout.Ranges(0, 10*mib)})
	oldSum := sum(t, old)
	_, err := Copy(t.Context(), src, old, &Options{Atomic: true})
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.Equal(t, oldSum, sum(t, old), "atomic mode keeps the old destination")
	require.Equal(t, want, sum(t, src))
	tmps, _ := filepath.Glob(filepath.Join(small, ".*"))
	require.Empty(t, tmps)
}

// TestSourceChanged writes to the source while it is copied, 20 times:
// every copy ends, with ErrSourceChanged, and in atomic mode the old
// destination stays. The write is made from the copy's first Progress call,
// so it lands after the copy took the source's identity and before it
// compares it, whatever the scheduling (a writer goroutine racing the copy
// could miss it under load). Each trial first writes the source, so its
// last change is as recent as can be when the copy starts: the copy must
// itself wait for the filesystem clock to pass it (sparse.NewSettledWalker)
// before it takes the source's identity, or a write in the same clock tick
// could keep the ctime it compares (multigrain timestamps, Linux 6.13+ on
// ext4, XFS, btrfs and tmpfs, rule that out by themselves; older kernels and
// other filesystems do not).
func TestSourceChanged(t *testing.T) {
	dir := loopfs.Mount(t, loopfs.Tmpfs, gib)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	layout.Create(t, src, layout.Layout{Size: 64 * mib, Data: layout.Ranges(0, 32*mib, 40*mib, 24*mib)})
	require.NoError(t, os.WriteFile(dst, []byte("old"), 0o644))
	for i := range 20 {
		f, err := os.OpenFile(src, os.O_RDWR, 0)
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(uint64(i), 9))
		b := make([]byte, 4096)
		layout.Pattern(b, int64(i)+1)
		_, err = f.WriteAt(b, 0) // the last change: just now
		require.NoError(t, err)
		var once sync.Once
		var wrote atomic.Bool
		_, err = Copy(t.Context(), src, dst, &Options{Atomic: i%2 == 0, NoSync: true, Progress: func(done, total int64) {
			once.Do(func() {
				_, werr := f.WriteAt(b, r.Int64N(64*mib-4096))
				require.NoError(t, werr)
				wrote.Store(true)
			})
		}})
		require.NoError(t, f.Close())
		require.True(t, wrote.Load(), "trial %d: no progress reported", i)
		require.ErrorIs(t, err, ErrSourceChanged, "trial %d", i)
		if i%2 == 0 {
			b, err := os.ReadFile(dst)
			require.NoError(t, err)
			require.Equal(t, "old", string(b), "trial %d: atomic mode replaced the destination", i)
		} else {
			require.NoError(t, os.WriteFile(dst, []byte("old"), 0o644))
		}
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, ".*"))
	require.Empty(t, tmps)
}

// losetup attaches a loop device to a new file of size bytes.
func losetup(t *testing.T, size int64, fill byte) string {
	t.Helper()
	loopfs.NeedRoot(t)
	img := filepath.Join(t.TempDir(), "dev.img")
	require.NoError(t, os.WriteFile(img, bytes.Repeat([]byte{fill}, int(size)), 0o600))
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		loopfs.Unavailable(t, "losetup: "+strings.TrimSpace(string(out)))
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev
}

// TestBlockDevices copies from a loop device (1 MiB of data at 8 MiB) into
// a file, which gets the data only, and into a loop device pre-filled with
// 0xFF, whose holes must read back as zeros; a source larger than the
// device is refused before any write.
func TestBlockDevices(t *testing.T) {
	dir := loopfs.Mount(t, loopfs.Ext4, gib)
	t.Run("source", func(t *testing.T) {
		dev := losetup(t, 16*mib, 0)
		f, err := os.OpenFile(dev, os.O_RDWR, 0)
		require.NoError(t, err)
		b := make([]byte, mib)
		layout.Pattern(b, 8*mib)
		_, err = f.WriteAt(b, 8*mib)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		dst := filepath.Join(dir, "from-dev")
		st, err := Copy(t.Context(), dev, dst, nil)
		require.NoError(t, err)
		require.Equal(t, 16*mib, st.Size)
		require.Equal(t, mib, st.CopiedBytes)
		require.Equal(t, 15*mib, st.ZeroBytes)
		require.Equal(t, layout.Ranges(8*mib, mib), layout.SeekWalk(t, dst))
		require.Equal(t, sum(t, dev), sum(t, dst))
	})
	t.Run("destination", func(t *testing.T) {
		dev := losetup(t, 16*mib, 0xFF)
		src := filepath.Join(dir, "to-dev")
		l := layout.Layout{Size: 12*mib + 512, Data: layout.Ranges(mib, 2*mib, 8*mib, 1000, 12*mib, 512)}
		layout.Create(t, src, l)
		st, err := Copy(t.Context(), src, dev, nil)
		require.NoError(t, err)
		require.Equal(t, l.Size-l.DataBytes()-(4096-1000), st.PunchedBytes+st.ZeroedBytes)
		got := make([]byte, l.Size)
		f, err := os.Open(dev)
		require.NoError(t, err)
		defer f.Close()
		_, err = io.ReadFull(f, got)
		require.NoError(t, err)
		want, err := os.ReadFile(src)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), "device contents differ from the source")
		rest := make([]byte, 16*mib-l.Size)
		_, err = io.ReadFull(f, rest)
		require.NoError(t, err)
		require.Equal(t, bytes.Repeat([]byte{0xFF}, len(rest)), rest, "bytes past the source's size are not touched")

		big := filepath.Join(dir, "too-big")
		layout.Create(t, big, layout.Layout{Size: 17 * mib, Data: layout.Ranges(0, mib)})
		before := sum(t, dev)
		_, err = Copy(t.Context(), big, dev, nil)
		require.ErrorIs(t, err, ErrDestinationTooSmall)
		require.Equal(t, before, sum(t, dev))
	})
}

// TestFIFOSourceRefusedWithoutWaiting: a named pipe as the source is
// refused at once (it used to block in open(2) until a writer came, and
// Ctrl-C could not end it), and no destination is created.
func TestFIFOSourceRefusedWithoutWaiting(t *testing.T) {
	dir := t.TempDir()
	fifo, dst := filepath.Join(dir, "fifo"), filepath.Join(dir, "dst")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	done := make(chan error, 1)
	go func() {
		_, err := Copy(t.Context(), fifo, dst, nil)
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		require.ErrorContains(t, err, fifo)
	case <-time.After(30 * time.Second):
		// Unblock the open so the goroutine ends, then fail.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("Copy of a FIFO is still waiting in open")
	}
	require.NoFileExists(t, dst)
}
