package rebuild

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/sparsesync/sparsesync/replica"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/sparse"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// On XFS with reflink a local rebuild clones: every data extent of every
// image of the target is shared with the source (FIEMAP), and the target
// reads as the source.
func TestRebuildXFSReflink(t *testing.T) {
	mnt := loopfs.Mount(t, loopfs.XFS, 3<<30)
	src, dst := filepath.Join(mnt, "src"), filepath.Join(mnt, "dst")
	makeSourceLayers(t, src, 2<<30, 64<<20, 64<<20, 1<<30)
	st, err := Rebuild(t.Context(), src, dst, nil)
	require.NoError(t, err)
	require.Equal(t, PathLocal, st.Path)
	var cloned int64
	for _, f := range st.Files {
		cloned += f.ClonedBytes
		require.Zero(t, f.CopiedBytes, "%s was copied, not cloned", f.Name)
	}
	require.GreaterOrEqual(t, cloned, int64(1<<30+128<<20))
	for _, img := range []string{replica.SnapshotName("s1"), replica.SnapshotName("s2"), replica.HeadName(2)} {
		f, err := os.Open(filepath.Join(dst, img))
		require.NoError(t, err)
		n, shared := 0, int64(0)
		require.NoError(t, sparse.Fiemap(t.Context(), f, 0, 2<<30, func(e sparse.FiemapExtent) error {
			n++
			require.NotZero(t, e.Flags&sparse.FiemapShared, "%s: extent %+v (%v) not shared", img, e, e.Flags)
			shared += e.Length
			return nil
		}))
		f.Close()
		require.Positive(t, n, img)
		t.Logf("%s: %d extents, %d bytes, all shared", img, n, shared)
	}
	requireSameReplica(t, src, dst)
	// The exported images are identical (exported to the test's temporary
	// directory, compared by streaming).
	ea, eb := filepath.Join(t.TempDir(), "a.img"), filepath.Join(t.TempDir(), "b.img")
	_, err = replica.Export(t.Context(), src, ea, nil)
	require.NoError(t, err)
	_, err = replica.Export(t.Context(), dst, eb, nil)
	require.NoError(t, err)
	requireSameFile(t, ea, eb)
}

// ext4 to XFS: no reflink across filesystems; correct, and the second
// rebuild writes only the blocks that changed.
func TestRebuildCrossFilesystem(t *testing.T) {
	ext4 := loopfs.Mount(t, loopfs.Ext4, 1<<30)
	xfs := loopfs.Mount(t, loopfs.XFS, 1<<30)
	src, dst := filepath.Join(ext4, "src"), filepath.Join(xfs, "dst")
	makeSource(t, src, 64<<20, 8<<20)
	st, err := Rebuild(t.Context(), src, dst, nil)
	require.NoError(t, err)
	require.Equal(t, PathLocal, st.Path)
	requireSameReplica(t, src, dst)
	require.Zero(t, sum(st.Files, func(f File) int64 { return f.ClonedBytes }))
	require.GreaterOrEqual(t, sum(st.Files, copied), int64(24<<20))

	r, err := replica.Open(src, nil)
	require.NoError(t, err)
	_, err = r.WriteAt(bytes.Repeat([]byte("c"), 3*replica.BlockSize), 10<<20)
	require.NoError(t, err)
	_, err = r.WriteAt(bytes.Repeat([]byte("d"), replica.BlockSize), 50<<20)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	st, err = Rebuild(t.Context(), src, dst, nil)
	require.NoError(t, err)
	requireSameReplica(t, src, dst)
	var img, unchanged int64
	for _, f := range st.Files {
		if strings.HasSuffix(f.Name, ".img") {
			img += f.CopiedBytes + f.ClonedBytes
			unchanged += f.UnchangedBytes
		}
	}
	require.Equal(t, int64(4*replica.BlockSize), img, "%+v", st.Files)
	require.GreaterOrEqual(t, unchanged, int64(24<<20))
}

// requireSameFile compares two files: size, data map and bytes.
func requireSameFile(t *testing.T, a, b string) {
	ma, ia, err := sparse.ReadMap(t.Context(), a)
	require.NoError(t, err)
	mb, ib, err := sparse.ReadMap(t.Context(), b)
	require.NoError(t, err)
	require.Equal(t, ia.Size, ib.Size)
	require.Equal(t, ma.Extents(), mb.Extents())
	fa, err := os.Open(a)
	require.NoError(t, err)
	defer fa.Close()
	fb, err := os.Open(b)
	require.NoError(t, err)
	defer fb.Close()
	x, y := make([]byte, 4<<20), make([]byte, 4<<20)
	for _, e := range ma.Extents() {
		for off := e.Off; off < e.End(); {
			n := min(int64(len(x)), e.End()-off)
			_, err := fa.ReadAt(x[:n], off)
			require.NoError(t, err)
			_, err = fb.ReadAt(y[:n], off)
			require.NoError(t, err)
			require.True(t, bytes.Equal(x[:n], y[:n]), "[%d, %d) differs", off, off+n)
			off += n
		}
	}
}

const rebuildChildEnv = "SPARSESYNC_REBUILD_CHILD"

type rebuildChildSpec struct {
	Source, Target, Ready string
	TCP                   bool // rebuild over TCP only, from a server in the child
}

// TestRebuildChild is the child process of TestRebuildKilled: it rebuilds
// slowly (a pause before each step) until it is killed.
func TestRebuildChild(t *testing.T) {
	raw := os.Getenv(rebuildChildEnv)
	if raw == "" {
		t.Skip("helper process of TestRebuildKilled")
	}
	var spec rebuildChildSpec
	require.NoError(t, json.Unmarshal([]byte(raw), &spec))
	o := &Options{fault: func(step, name string) error {
		time.Sleep(8 * time.Millisecond)
		return nil
	}}
	source := spec.Source
	if spec.TCP {
		o.Remote, o.RemoteDir, o.TCP = serveDir(t, spec.Source), filepath.Base(spec.Source), tcpsync.Options{NoAuth: true, MaxAttempts: 1}
		source = ""
	}
	require.NoError(t, os.WriteFile(spec.Ready, []byte("R"), 0o600))
	_, err := Rebuild(t.Context(), source, spec.Target, o)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(spec.Ready, []byte("D"), 0o600))
}

// A rebuild killed (SIGKILL) at random points never leaves a target that
// opens as a healthy replica (unless it had finished), and the next
// rebuild completes it. Every other child copies over TCP only.
func TestRebuildKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	root := t.TempDir()
	src := filepath.Join(root, "src")
	makeSource(t, src, 32<<20, 4<<20)
	want := exportBytes(t, src)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	interrupted := 0
	for rep := range 10 {
		dst := filepath.Join(root, fmt.Sprintf("dst%d", rep))
		ready := filepath.Join(root, fmt.Sprintf("ready%d", rep))
		spec, _ := json.Marshal(rebuildChildSpec{Source: src, Target: dst, Ready: ready, TCP: rep%2 == 1})
		cmd := exec.Command(exe, "-test.run=^TestRebuildChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), rebuildChildEnv+"="+string(spec))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		for deadline := time.Now().Add(childWait); ; time.Sleep(2 * time.Millisecond) {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("rep %d: child never started: %s", rep, out.String())
			}
		}
		delay := time.Duration(rng.IntN(120)) * time.Millisecond
		time.Sleep(delay)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		state, _ := os.ReadFile(ready)
		finished := string(state) == "D"
		r, err := replica.Open(dst, nil)
		if err == nil {
			r.Close()
		}
		if finished {
			require.NoError(t, err, "rep %d: finished rebuild does not open", rep)
		} else {
			interrupted++
			require.Error(t, err, "rep %d: killed after %v, the target opens", rep, delay)
			_, cerr := replica.Check([]string{src, dst}, nil)
			require.NoError(t, cerr)
			rep, _ := replica.Check([]string{src, dst}, nil)
			require.Equal(t, []string{src}, rep.RW, "the start check takes the interrupted target")
		}
		t.Logf("rep %d (tcp=%v): killed after %v; finished=%v, open error: %v", rep, rep%2 == 1, delay, finished, err)
		_, err = Rebuild(t.Context(), src, dst, nil)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, exportBytes(t, dst)), "rep %d", rep)
		requireSameReplica(t, src, dst)
		require.ElementsMatch(t, []string{replica.VolumeMetaFile, replica.RevisionCounterFile, replica.HeaderFile, replica.LiveCounterFile, // (Open made it)
			replica.SnapshotName("s1"), replica.MetaName(replica.SnapshotName("s1")), replica.SnapshotName("s2"), replica.MetaName(replica.SnapshotName("s2")),
			replica.HeadName(2), replica.MetaName(replica.HeadName(2))}, fileNames(t, dst), "rep %d: leftover files", rep)
	}
	require.GreaterOrEqual(t, interrupted, 5, "too few kills landed inside the rebuild")
}

// verifyCopy accepts a reflink copy by its physical blocks and still
// catches a differing byte in a copy that does not share them.
func TestVerifyCopy(t *testing.T) {
	mnt := loopfs.Mount(t, loopfs.XFS, 512<<20)
	a, b, c := filepath.Join(mnt, "a"), filepath.Join(mnt, "b"), filepath.Join(mnt, "c")
	buf := bytes.Repeat([]byte("v"), 1<<20)
	for _, p := range []string{a, c} {
		f, err := os.Create(p)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(8<<20))
		_, err = f.WriteAt(buf, 1<<20)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	out, err := exec.Command("cp", "--reflink=always", a, b).CombinedOutput()
	require.NoError(t, err, string(out))
	ok, err := sameBlocks(t.Context(), a, b)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, verifyCopy(t.Context(), a, b, nil))
	ok, err = sameBlocks(t.Context(), a, c)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, verifyCopy(t.Context(), a, c, nil))
	f, err := os.OpenFile(c, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("x"), 1<<20+12345)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.ErrorIs(t, verifyCopy(t.Context(), a, c, nil), replica.ErrVerify)
}

// verifyCopy and sameBlocks hold a window of verifyWindow extents of each
// file at a time: over several windows a reflink copy is still proved by
// its blocks, a destination denser than its source (its windows end sooner)
// is still read wherever either file has data, and a differing byte or data
// in a source hole is caught in the last window.
func TestVerifyCopyInWindows(t *testing.T) {
	mnt := loopfs.Mount(t, loopfs.XFS, 1<<30)
	const n, stride = 3*verifyWindow + 100, 16 << 10
	a := filepath.Join(mnt, "a")
	block := bytes.Repeat([]byte("w"), 4096)
	write := func(p string, offs func(i int) []int64, data []byte) {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		defer f.Close()
		require.NoError(t, f.Truncate(n*stride))
		for i := range n {
			for _, off := range offs(i) {
				_, err := f.WriteAt(data, off)
				require.NoError(t, err)
			}
		}
	}
	write(a, func(i int) []int64 { return []int64{int64(i) * stride} }, block)
	cp := func(dst string, args ...string) {
		out, err := exec.Command("cp", append(args, a, dst)...).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	b := filepath.Join(mnt, "b")
	cp(b, "--reflink=always")
	ok, err := sameBlocks(t.Context(), a, b)
	require.NoError(t, err)
	require.True(t, ok, "a reflink copy over several windows")
	require.NoError(t, verifyCopy(t.Context(), a, b, nil))

	// A destination with zeros written in every source hole: twice the
	// extents, so its windows end sooner; it reads the same.
	c := filepath.Join(mnt, "c")
	cp(c, "--reflink=never", "--sparse=always")
	zeros := make([]byte, 4096)
	write(c, func(i int) []int64 { return []int64{int64(i)*stride + 8<<10} }, zeros)
	ok, err = sameBlocks(t.Context(), a, c)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, verifyCopy(t.Context(), a, c, nil))

	// Data in one of those destination-only extents, past where the
	// destination's first window ends (2,048 strides) but inside the
	// source's (4,096).
	last := int64(3000)*stride + 8<<10 + 100
	f, err := os.OpenFile(c, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("x"), last)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	err = verifyCopy(t.Context(), a, c, nil)
	require.ErrorIs(t, err, replica.ErrVerify)
	require.Contains(t, err.Error(), fmt.Sprintf("[%d,", last-100), "names the range")

	// A differing byte of the source's data in the last window.
	d := filepath.Join(mnt, "d")
	cp(d, "--reflink=never", "--sparse=always")
	f, err = os.OpenFile(d, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("x"), int64(n-2)*stride+7)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.ErrorIs(t, verifyCopy(t.Context(), a, d, nil), replica.ErrVerify)
}
