package rebuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/replica"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/lhdir"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// makeSource creates a closed replica of size bytes with a head and two
// snapshots holding data patterns (dataPerLayer bytes per layer, spread).
func makeSource(t testing.TB, dir string, size, dataPerLayer int64) {
	makeSourceLayers(t, dir, size, dataPerLayer, dataPerLayer, dataPerLayer)
}

// makeSourceLayers is makeSource with the data of snapshot s1, snapshot
// s2 and the head given apart.
func makeSourceLayers(t testing.TB, dir string, size int64, data ...int64) {
	t.Helper()
	r, err := replica.Create(dir, size, nil)
	require.NoError(t, err)
	buf := coldread.AlignedBuffer(1 << 20)
	writeLayer := func(seed, data int64) {
		step := size / max(1, data/int64(len(buf)))
		step -= step % replica.BlockSize
		for off, n := seed*8192, int64(0); n < data && off+int64(len(buf)) <= size; off, n = off+step, n+int64(len(buf)) {
			layout.Pattern(buf, off+seed)
			_, err := r.WriteAt(buf, off)
			require.NoError(t, err)
		}
	}
	writeLayer(0, data[0])
	require.NoError(t, r.Snapshot("s1", nil))
	writeLayer(1, data[1])
	_, err = r.WriteAt([]byte("unaligned"), 5000)
	require.NoError(t, err)
	require.NoError(t, r.Snapshot("s2", nil))
	writeLayer(2, data[2])
	require.NoError(t, r.Close())
}

// exportBytes exports dir and returns the image.
func exportBytes(t testing.TB, dir string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "export.img")
	_, err := replica.Export(context.Background(), dir, out, nil)
	require.NoError(t, err)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	return b
}

// requireSameReplica checks that target opens as a healthy replica with
// the source's content, counter and volume.
func requireSameReplica(t testing.TB, source, target string) {
	t.Helper()
	requireSameVolume(t, source, target)
	si, err := replica.Inspect(source, nil)
	require.NoError(t, err)
	ti, err := replica.Inspect(target, nil)
	require.NoError(t, err)
	require.Equal(t, si.Revision, ti.Revision)
	require.Equal(t, si.Chain, ti.Chain)
	rep, err := replica.Check([]string{source, target}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{source, target}, rep.RW, "%+v", rep)
	r, err := replica.Open(target, nil)
	require.NoError(t, err)
	require.NoError(t, r.Close())
}

// requireSameVolume compares the volumes of two replica directories
// through their chain readers: equal data maps, equal bytes.
func requireSameVolume(t testing.TB, a, b string) {
	t.Helper()
	ca, err := replica.OpenChain(a)
	require.NoError(t, err)
	defer ca.Close()
	cb, err := replica.OpenChain(b)
	require.NoError(t, err)
	defer cb.Close()
	ma, err := ca.Map(context.Background())
	require.NoError(t, err)
	mb, err := cb.Map(context.Background())
	require.NoError(t, err)
	require.Equal(t, ma.Extents(), mb.Extents(), "data maps differ")
	x, y := make([]byte, 4<<20), make([]byte, 4<<20)
	for _, e := range ma.Extents() {
		for off := e.Off; off < e.End(); {
			n := min(int64(len(x)), e.End()-off)
			_, err := ca.ReadAt(x[:n], off)
			require.NoError(t, err)
			_, err = cb.ReadAt(y[:n], off)
			require.NoError(t, err)
			require.True(t, bytes.Equal(x[:n], y[:n]), "volumes differ in [%d, %d)", off, off+n)
			off += n
		}
	}
}

func fileNames(t testing.TB, dir string) []string {
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func sum(files []File, f func(File) int64) (n int64) {
	for _, x := range files {
		n += f(x)
	}
	return n
}

func copied(f File) int64 { return f.CopiedBytes + f.ClonedBytes }

func TestRebuildLocalIncremental(t *testing.T) {
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	makeSource(t, src, 16<<20, 2<<20)
	st, err := Rebuild(t.Context(), src, dst, nil)
	require.NoError(t, err)
	require.Equal(t, PathLocal, st.Path)
	require.Empty(t, st.FallbackReason)
	require.Len(t, st.Files, 6)
	requireSameReplica(t, src, dst)

	// Unchanged: nothing is written again.
	st, err = Rebuild(t.Context(), src, dst, nil)
	require.NoError(t, err)
	require.Zero(t, sum(st.Files, func(f File) int64 { return f.CopiedBytes }), "%+v", st.Files)

	// One more write and a snapshot on the source: the old head of the
	// target is gone, the new files are copied, the counter follows.
	r, err := replica.Open(src, nil)
	require.NoError(t, err)
	_, err = r.WriteAt(bytes.Repeat([]byte("x"), 4096), 1<<20)
	require.NoError(t, err)
	require.NoError(t, r.Snapshot("s3", nil))
	_, err = r.WriteAt(bytes.Repeat([]byte("y"), 4096), 2<<20)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	st, err = Rebuild(t.Context(), src, dst, nil)
	require.NoError(t, err)
	requireSameReplica(t, src, dst)
	require.NotContains(t, fileNames(t, dst), replica.HeadName(2), "stale head of the old copy")
	require.Less(t, sum(st.Files, copied), int64(4<<20))
}

func TestRebuildRefusesSameDirAndLiveSource(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	makeSource(t, src, 1<<20, 1<<20)
	_, err := Rebuild(t.Context(), src, src, nil)
	require.Error(t, err)
	requireSameReplicaSelf(t, src)

	r, err := replica.Open(src, nil)
	require.NoError(t, err)
	dst := filepath.Join(t.TempDir(), "dst")
	_, err = Rebuild(t.Context(), src, dst, nil)
	require.ErrorIs(t, err, replica.ErrBusy)
	require.Empty(t, fileNames(t, dst))
	require.NoError(t, r.Close())
}

// TestRebuildSourceLocked: a caller that holds the source's directory lock
// itself (the disk agent) gets its copy with SourceLocked, and without it
// Rebuild refuses the busy source.
func TestRebuildSourceLocked(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	makeSource(t, src, 1<<20, 1<<20)
	lock, err := replica.LockDir(src)
	require.NoError(t, err)
	defer lock.Close()
	dst := filepath.Join(t.TempDir(), "dst")
	_, err = Rebuild(t.Context(), src, dst, nil)
	require.ErrorIs(t, err, replica.ErrBusy)
	_, err = Rebuild(t.Context(), src, dst, &Options{SourceLocked: true})
	require.NoError(t, err)
	requireSameReplica(t, src, dst)
}

func requireSameReplicaSelf(t *testing.T, dir string) {
	r, err := replica.Open(dir, nil)
	require.NoError(t, err)
	require.NoError(t, r.Close())
}

// serveDir starts a loopback tcpsync server whose root is dir's parent.
func serveDir(t *testing.T, dir string) string {
	ctx, cancel := context.WithCancel(context.Background())
	srv := &tcpsync.Server{Root: filepath.Dir(dir), NoAuth: true}
	addr, wait, err := tcpsync.ServeLoopback(ctx, srv)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); require.NoError(t, wait()) })
	return addr
}

// servePulls serves root on loopback without authentication and records
// the server's successful pull sessions; pulls(n) waits for n at least
// (OnSession runs after the client has its answer) and returns them.
func servePulls(t *testing.T, root string) (addr string, pulls func(n int) []tcpsync.SessionEvent) {
	var mu sync.Mutex
	var got []tcpsync.SessionEvent
	ctx, cancel := context.WithCancel(context.Background())
	srv := &tcpsync.Server{Root: root, NoAuth: true, OnSession: func(ev tcpsync.SessionEvent) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Op == "pull" && ev.Err == nil {
			got = append(got, ev)
		}
	}}
	addr, wait, err := tcpsync.ServeLoopback(ctx, srv)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); require.NoError(t, wait()) })
	return addr, func(n int) []tcpsync.SessionEvent {
		t.Helper()
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) >= n
		}, 30*time.Second, 10*time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

func TestRebuildFallbackToTCP(t *testing.T) {
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	makeSource(t, src, 8<<20, 1<<20)
	fault := func(step, name string) error {
		if step == "local" && name == replica.MetaName(replica.SnapshotName("s1")) { // the second file
			return errors.New("injected local copy failure")
		}
		return nil
	}

	// Without a fallback the rebuild fails and leaves nothing behind.
	_, err := Rebuild(t.Context(), src, dst, &Options{fault: fault})
	require.ErrorContains(t, err, "injected")
	require.Empty(t, fileNames(t, dst), "files of the failed local attempt")

	var logged bytes.Buffer
	addr := serveDir(t, src)
	var local []string
	tcpStarted := false
	o := &Options{Remote: addr, TCP: tcpsync.Options{NoAuth: true, MaxAttempts: 1},
		Logger: newTestLogger(&logged),
		fault: func(step, name string) error {
			if step == "local" {
				local = append(local, name)
			}
			if step == "tcp" && !tcpStarted && slices.Contains(fileNames(t, dst), replica.SnapshotName("s1")) {
				// The network copy starts from a target without the
				// local attempt's files.
				t.Errorf("leftover %s from the local attempt", replica.SnapshotName("s1"))
			}
			tcpStarted = tcpStarted || step == "tcp"
			return fault(step, name)
		}}
	st, err := Rebuild(t.Context(), src, dst, o)
	require.NoError(t, err)
	require.Equal(t, PathLocalTCP, st.Path)
	require.Contains(t, st.FallbackReason, "injected")
	require.Equal(t, []string{replica.SnapshotName("s1"), replica.MetaName(replica.SnapshotName("s1"))}, local)
	require.Contains(t, logged.String(), "level=WARN")
	require.Contains(t, logged.String(), "falling back to TCP")
	requireSameReplica(t, src, dst)
}

func TestRebuildTCPOnlyIncremental(t *testing.T) {
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	makeSource(t, src, 8<<20, 1<<20)
	o := &Options{Remote: serveDir(t, src), RemoteDir: "src", TCP: tcpsync.Options{NoAuth: true, MaxAttempts: 1}}
	st, err := Rebuild(t.Context(), "", dst, o)
	require.NoError(t, err)
	require.Equal(t, PathTCP, st.Path)
	requireSameReplica(t, src, dst)

	r, err := replica.Open(src, nil)
	require.NoError(t, err)
	_, err = r.WriteAt(bytes.Repeat([]byte("z"), 8192), 3<<20)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	st, err = Rebuild(t.Context(), "", dst, o)
	require.NoError(t, err)
	requireSameReplica(t, src, dst)
	var img int64
	for _, f := range st.Files {
		if filepath.Ext(f.Name) == ".img" {
			img += f.CopiedBytes
		}
	}
	require.Equal(t, int64(8192), img, "%+v", st.Files)
}

func newTestLogger(w *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// Image names in the peer's metadata become local file names: a chain that
// names anything but head and snapshot images is refused before any copy.
func TestRebuildTCPRefusesBadNames(t *testing.T) {
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	makeSource(t, src, 1<<20, 1<<20)
	meta := filepath.Join(src, replica.MetaName(replica.SnapshotName("s1")))
	require.NoError(t, os.WriteFile(meta, []byte(`{"Name":"volume-snap-s1.img","Parent":"volume.meta"}`), 0o600))
	o := &Options{Remote: serveDir(t, src), RemoteDir: "src", TCP: tcpsync.Options{NoAuth: true, MaxAttempts: 1}}
	_, err := Rebuild(t.Context(), "", dst, o)
	require.ErrorIs(t, err, replica.ErrCorrupt)
	require.ErrorContains(t, err, "volume.meta")
	// The failed rebuild removed its incomplete copy (purgeFailed).
	_, err = replica.Open(dst, nil)
	require.ErrorIs(t, err, replica.ErrNotReplica)
	require.Empty(t, adoptable(t, dst))
	for _, bad := range []string{"..", ".", "volume.meta", "volume-snap-../x.img", "volume-snap-.img", "x.img"} {
		require.False(t, replica.ValidImageName(bad), bad)
	}
	require.True(t, replica.ValidImageName(replica.HeadName(7)))
	require.True(t, replica.ValidImageName(replica.SnapshotName("a-b_c.1")))
}

// A directory Longhorn wrote (no replica.hdr) rebuilds into one that
// Longhorn would read: same chain and bytes, revision.counter copied, no
// header of ours.
func TestRebuildLonghornDirectory(t *testing.T) {
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	lhdir.WriteDir(t, src, 42, map[int64]byte{0: 'h', 8192: 'H'}, map[int64]byte{0: 's', 4096: 'S'})
	st, err := Rebuild(t.Context(), src, dst, nil)
	require.NoError(t, err)
	require.Equal(t, int64(42), st.Revision)
	require.True(t, bytes.Equal(exportBytes(t, src), exportBytes(t, dst)))
	b, err := os.ReadFile(filepath.Join(dst, replica.RevisionCounterFile))
	require.NoError(t, err)
	n, err := replica.ParseRevisionCounter(b)
	require.NoError(t, err)
	require.Equal(t, int64(42), n)
	require.NotContains(t, fileNames(t, dst), replica.HeaderFile)
	i, err := replica.Inspect(dst, nil)
	require.NoError(t, err)
	require.Equal(t, int64(42), *i.Revision)
	require.False(t, i.HasHeader)
}

// TestRebuildTCPReadsBack: a rebuild over TCP asks for the read-back on
// every pull (tcpsync.ReadBackOn when its options leave the default), so
// each copied file is checked as stored; ReadBackOff turns it off. The
// server's session events say whether a pull was a read-back sync.
func TestRebuildTCPReadsBack(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	makeSource(t, src, 8<<20, 1<<20)
	for _, c := range []struct {
		mode tcpsync.ReadBack
		want bool
	}{{tcpsync.ReadBackAuto, true}, {tcpsync.ReadBackOff, false}} {
		t.Run(fmt.Sprint(c.want), func(t *testing.T) {
			addr, pulls := servePulls(t, root)
			dst := filepath.Join(t.TempDir(), "dst")
			o := &Options{Remote: addr, RemoteDir: "src", TCP: tcpsync.Options{NoAuth: true, MaxAttempts: 1, ReadBack: c.mode}}
			st, err := Rebuild(t.Context(), "", dst, o)
			require.NoError(t, err)
			require.Equal(t, PathTCP, st.Path)
			requireSameReplica(t, src, dst)
			for _, ev := range pulls(len(st.Files)) {
				require.Equal(t, c.want, ev.Stats.ReadBack, "mode %v: pull of %s", c.mode, ev.Path)
			}
		})
	}
}
