package tcpsync

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// sessionEndsOpt returns a Server option that reports every finished session
// on the returned channel, so tests wait for a session's end (its lock and
// its last checkpoint) instead of polling files.
func sessionEndsOpt() (func(*Server), <-chan SessionEvent) {
	ch := make(chan SessionEvent, 64)
	return func(s *Server) { s.OnSession = func(ev SessionEvent) { ch <- ev } }, ch
}

func waitSession(t *testing.T, ch <-chan SessionEvent) SessionEvent {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(60 * time.Second):
		t.Fatal("no session ended")
		return SessionEvent{}
	}
}

func requireFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "%s changed", path)
}

// TestHardLinksRefused: a hard link inside the root may name a file
// outside it. Pushing to it, pulling it, a hard-linked sidecar, and links
// planted at the old fixed temporary names never read or write the outside
// file (issue 12, hole 5).
func TestHardLinksRefused(t *testing.T) {
	base := t.TempDir()
	root, local, outside := filepath.Join(base, "root"), filepath.Join(base, "local"), filepath.Join(base, "outside")
	for _, d := range []string{root, local, outside} {
		require.NoError(t, os.Mkdir(d, 0o755))
	}
	secret := bytes.Repeat([]byte("outside secret "), 1000)
	out := filepath.Join(outside, "secret")
	require.NoError(t, os.WriteFile(out, secret, 0o600))
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 4<<20, 0.5, 3, 1))
	addr, _ := startServer(t, root, nil)

	require.NoError(t, os.Link(out, filepath.Join(root, "victim")))
	for _, atomic := range []bool{false, true} {
		o := clientOpts()
		o.Atomic = atomic
		_, err := PushFile(t.Context(), addr, src, "victim", o)
		require.ErrorIs(t, err, ErrPathOutsideRoot, "push onto a hard link, atomic=%v", atomic)
	}
	_, err := Pull(t.Context(), addr, "victim", filepath.Join(local, "got"), clientOpts())
	require.ErrorIs(t, err, ErrPathOutsideRoot, "pull of a hard link")
	_, err = os.Stat(filepath.Join(local, "got"))
	require.ErrorIs(t, err, os.ErrNotExist, "the refused pull left no file")

	// A sidecar that is a hard link.
	require.NoError(t, os.Link(out, filepath.Join(root, "img2"+sidecarSuffix)))
	_, err = PushFile(t.Context(), addr, src, "img2", clientOpts())
	require.ErrorIs(t, err, ErrPathOutsideRoot, "push whose sidecar is a hard link")

	// Links at the temporary names older versions used: never opened for
	// writing (the temporary files now have random names, O_EXCL).
	require.NoError(t, os.Link(out, filepath.Join(root, ".img"+tmpSuffix)))
	require.NoError(t, os.Link(out, filepath.Join(root, "img"+sidecarSuffix+".new")))
	for _, atomic := range []bool{true, false} {
		o := clientOpts()
		o.Atomic = atomic
		_, err := PushFile(t.Context(), addr, src, "img", o)
		require.NoError(t, err, "atomic=%v", atomic)
		requireSame(t, src, filepath.Join(root, "img"))
	}
	requireFile(t, out, secret)
}

// TestTempNamesUnpredictable: two atomic syncs of one name use different
// temporary names with 64 random bits, created exclusively.
func TestTempNamesUnpredictable(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, nil)
	require.NoError(t, writeImage(filepath.Join(root, "img"), 2<<20, 0.5, 2, 3))
	pat := regexp.MustCompile(`^\.dst\.[0-9a-f]{16}` + regexp.QuoteMeta(tmpSuffix) + `$`)
	var seen []string
	o := clientOpts()
	o.Atomic = true
	o.hooks = &testHooks{beforeFinalCheck: func(f *os.File) {
		des, err := os.ReadDir(local)
		if err != nil {
			t.Errorf("hook: %v", err) // on the receiver's goroutine: no FailNow
		}
		for _, de := range des {
			if pat.MatchString(de.Name()) {
				seen = append(seen, de.Name())
			}
		}
	}}
	for range 2 {
		_, err := Pull(t.Context(), addr, "img", filepath.Join(local, "dst"), o)
		require.NoError(t, err)
		require.NoError(t, os.Remove(filepath.Join(local, "dst"+sidecarSuffix))) // no quick check
	}
	require.Len(t, seen, 2, "one temporary file per sync, named .dst.<16 hex>%s", tmpSuffix)
	require.NotEqual(t, seen[0], seen[1])
}

// TestStaleTempRemoved: the temporary file of a killed atomic push (here a
// 2 GiB sparse leftover under both the random and the old fixed name) is
// removed by the next push to the same name, atomic or not, unless a live
// session holds it locked.
func TestStaleTempRemoved(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, nil)
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 1<<20, 0.5, 2, 4))
	mk := func(name string) string {
		p := filepath.Join(root, name)
		f, err := os.Create(p)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(2<<30))
		require.NoError(t, f.Close())
		return p
	}
	for _, atomic := range []bool{false, true} {
		stale := []string{mk(".img.0123456789abcdef" + tmpSuffix), mk(".img" + tmpSuffix), mk("img.fedcba9876543210" + sidecarSuffix + ".new")}
		live := mk(".img.00000000000000aa" + tmpSuffix)
		lf, err := os.Open(live)
		require.NoError(t, err)
		require.NoError(t, flock(lf))
		other := mk(".other.0123456789abcdef" + tmpSuffix) // another target's
		o := clientOpts()
		o.Atomic = atomic
		_, err = PushFile(t.Context(), addr, src, "img", o)
		require.NoError(t, err)
		for _, p := range stale {
			_, err := os.Stat(p)
			require.ErrorIs(t, err, os.ErrNotExist, "%s left behind (atomic=%v)", p, atomic)
		}
		for _, p := range []string{live, other} {
			_, err := os.Stat(p)
			require.NoError(t, err, "%s removed (atomic=%v)", p, atomic)
		}
		lf.Close()
		require.NoError(t, os.Remove(live))
		require.NoError(t, os.Remove(other))
	}
}

// TestOpenThenDisconnectLeavesNoFile: an OPEN for push followed by a
// disconnect leaves no empty file that could pass for a complete one; an
// existing target stays as it was.
func TestOpenThenDisconnectLeavesNoFile(t *testing.T) {
	root := t.TempDir()
	opt, ends := sessionEndsOpt()
	addr, _ := startServer(t, root, opt)
	require.NoError(t, os.WriteFile(filepath.Join(root, "old"), []byte("old contents"), 0o644))
	for _, name := range []string{"new.img", "old"} {
		f, c := rawSession(t, addr, testToken)
		require.NoError(t, f.send(wire.Open, 0, openBody(opPush, 0, 4096, name)))
		_, _, err := f.expect(wire.Opened)
		require.NoError(t, err)
		c.Close()
		ev := waitSession(t, ends)
		require.Error(t, ev.Err)
	}
	_, err := os.Stat(filepath.Join(root, "new.img"))
	require.ErrorIs(t, err, os.ErrNotExist, "the file the session created is removed")
	requireFile(t, filepath.Join(root, "old"), []byte("old contents"))
	_, err = os.Stat(filepath.Join(root, "old"+sidecarSuffix))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestSourceChangedDuringPush: the source is rewritten in place (same
// size) right after the sender's first read, deterministically through a
// read hook; the push fails with ErrSourceChanged, and the target is not
// marked complete (in place) or not replaced (atomic). Issue 12, hole 6.
func TestSourceChangedDuringPush(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	opt, ends := sessionEndsOpt()
	addr, _ := startServer(t, root, opt)
	src := filepath.Join(local, "src")
	for _, atomic := range []bool{false, true} {
		require.NoError(t, writeImage(src, 48<<20, 0.6, 3, 5))
		old := []byte("previous version")
		require.NoError(t, os.WriteFile(filepath.Join(root, "img"), old, 0o644))
		m, _, err := sparse.ReadMap(t.Context(), src)
		require.NoError(t, err)
		last := m.Extents()[m.Len()-1]
		f, err := os.Open(src)
		require.NoError(t, err)
		fs, err := NewFileSource(f)
		require.NoError(t, err)
		var once sync.Once
		fs.afterRead = func(int64) {
			once.Do(func() { // on the sender's goroutine: no FailNow
				var err error
				w, err2 := os.OpenFile(src, os.O_WRONLY, 0)
				if err2 == nil {
					_, err = w.WriteAt(bytes.Repeat([]byte{0xa5}, 4096), last.End()-4096)
					err2 = w.Close()
				}
				if err != nil || err2 != nil {
					t.Errorf("changing the source: %v %v", err, err2)
				}
			})
		}
		o := clientOpts()
		o.Atomic = atomic
		_, err = Push(t.Context(), addr, fs, "img", o)
		f.Close()
		require.ErrorIs(t, err, ErrSourceChanged, "atomic=%v", atomic)
		require.Error(t, waitSession(t, ends).Err)
		if atomic {
			requireFile(t, filepath.Join(root, "img"), old)
		} else {
			require.Equal(t, stateIncomplete, readSidecar(t, filepath.Join(root, "img")).State)
		}
		// The next push sends the new version whole and consistent.
		_, err = PushFile(t.Context(), addr, src, "img", o)
		require.NoError(t, err)
		waitSession(t, ends)
		requireSame(t, src, filepath.Join(root, "img"))
		require.NoError(t, os.Remove(filepath.Join(root, "img"+sidecarSuffix)))
	}
}

// TestResumeRefusesChangedTarget: a push is cut (the target marked
// incomplete with a checkpoint), 16 bytes below the checkpoint are damaged,
// and the next push does not trust the checkpoint: it compares every chunk,
// repairs the damage and ends identical (issue 12, hole 7).
func TestResumeRefusesChangedTarget(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	opt, ends := sessionEndsOpt()
	addr, _ := startServer(t, root, opt)
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 128<<20, 0.6, 8, 6))
	m, _, err := sparse.ReadMap(t.Context(), src)
	require.NoError(t, err)
	p := newCutProxy(t, addr, m.Bytes()*2/3)
	o := clientOpts()
	o.Compress = CompressNone
	_, err = PushFile(t.Context(), p.addr(), src, "img", o)
	require.Error(t, err)
	ev := waitSession(t, ends)
	t.Logf("cut at %d of %d data bytes: %v; server: %+v", m.Bytes()*2/3, m.Bytes(), err, ev)
	dst := filepath.Join(root, "img")
	sc := readSidecar(t, dst)
	require.Equal(t, stateIncomplete, sc.State)
	require.Positive(t, sc.Done)
	require.NotZero(t, sc.TargetIno, "the checkpoint records the target's identity")
	at := m.Extents()[0].Off + 8192
	require.Less(t, at+16, sc.Done)
	w, err := os.OpenFile(dst, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = w.WriteAt(bytes.Repeat([]byte{0xff}, 16), at)
	require.NoError(t, err)
	require.NoError(t, w.Close())

	st, err := PushFile(t.Context(), addr, src, "img", clientOpts())
	require.NoError(t, err)
	require.Zero(t, st.ResumedFrom, "a target changed since the checkpoint is compared in full")
	requireSame(t, src, dst)
	st, err = PushFile(t.Context(), addr, src, "img", clientOpts())
	require.NoError(t, err)
	require.True(t, st.QuickCheck)
}

// corrupt flips 16 bytes of f at off. It runs on a receiver's goroutine,
// so it reports with Errorf, never FailNow.
func corrupt(t *testing.T, f *os.File, off int64) {
	b := make([]byte, 16)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Errorf("corrupt: %v", err)
		return
	}
	for i := range b {
		b[i] ^= 0x5a
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Errorf("corrupt: %v", err)
	}
}

// TestReadBackCatchesStorageCorruption: the target is corrupted on disk
// behind the receiver's back, after every write and the final fdatasync,
// before the final check. With the read-back (the default for atomic
// syncs, ReadBackOn in place) every attempt ends with ErrVerify: in place
// the target is marked incomplete with no checkpoint over the bad chunk,
// atomic leaves the old version. Without it the sync reports success over
// the corrupted bytes, which is what the read-back is for.
func TestReadBackCatchesStorageCorruption(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, nil)
	require.NoError(t, writeImage(filepath.Join(root, "img"), 40<<20, 0.5, 4, 7))
	m, _, err := sparse.ReadMap(t.Context(), filepath.Join(root, "img"))
	require.NoError(t, err)
	at := m.Extents()[m.Len()-1].Off + 4096 // in the last chunk
	hooks := &testHooks{beforeFinalCheck: func(f *os.File) { corrupt(t, f, at) }}
	for _, c := range []struct {
		name string
		mode ReadBack
		atom bool
	}{{"in-place", ReadBackOn, false}, {"atomic", ReadBackAuto, true}} {
		t.Run(c.name, func(t *testing.T) {
			dst := filepath.Join(local, c.name)
			old := []byte("old version")
			require.NoError(t, os.WriteFile(dst, old, 0o644))
			o := clientOpts()
			o.Atomic, o.ReadBack, o.hooks = c.atom, c.mode, hooks
			st, err := Pull(t.Context(), addr, "img", dst, o)
			require.ErrorIs(t, err, ErrVerify)
			require.False(t, st.Verified)
			require.Equal(t, 2, st.Attempts, "the full-compare retry is caught too")
			if c.atom {
				requireFile(t, dst, old)
				left, _ := filepath.Glob(filepath.Join(local, "."+c.name+".*"))
				require.Empty(t, left, "temporary files left")
			} else {
				sc := readSidecar(t, dst)
				require.Equal(t, stateIncomplete, sc.State)
				require.Less(t, sc.Done, at, "no checkpoint covers the bad chunk")
			}
			// The same corruption without the read-back passes unseen.
			o.ReadBack = ReadBackOff
			st, err = Pull(t.Context(), addr, "img", dst, o)
			require.NoError(t, err)
			require.False(t, st.ReadBack)
			a, _ := os.ReadFile(filepath.Join(root, "img"))
			b, _ := os.ReadFile(dst)
			require.False(t, bytes.Equal(a, b), "the corruption is on disk")
			require.NoError(t, os.Remove(dst+sidecarSuffix))
		})
	}
}

// TestReadBackCatchesCorruptionBelowResume: a pull is cut; just before its
// last checkpoint a block of its first chunk is corrupted on disk, so the
// checkpoint (and the target identity it records) covers the corruption.
// The next pull resumes past it; its whole-file read-back finds the bad
// chunk, ends that attempt with ErrVerify and leaves the target incomplete
// with the checkpoint lowered to 0; the full-compare retry then repairs it.
// Never a success over the corrupted bytes.
func TestReadBackCatchesCorruptionBelowResume(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, nil)
	src := filepath.Join(root, "img")
	require.NoError(t, writeImage(src, 128<<20, 0.6, 8, 8))
	m, _, err := sparse.ReadMap(t.Context(), src)
	require.NoError(t, err)
	at := m.Extents()[0].Off + 4096
	dst := filepath.Join(local, "dst")

	var once sync.Once
	p := newCutProxy(t, addr, m.Bytes()*2/3)
	o := clientOpts()
	o.Compress = CompressNone
	o.ReadBack = ReadBackOn
	o.hooks = &testHooks{beforeCheckpoint: func(f *os.File, done int64) {
		if done > at {
			once.Do(func() { corrupt(t, f, at) })
		}
	}}
	_, err = Pull(t.Context(), p.addr(), "img", dst, o)
	require.Error(t, err)
	sc := readSidecar(t, dst)
	require.Equal(t, stateIncomplete, sc.State)
	require.Greater(t, sc.Done, at, "the checkpoint covers the corrupted block")

	// The resumed attempt: capture its failure and the sidecar it left.
	var failed atomic.Int32
	var after sidecar
	o.Logger = slog.New(&retryHook{fn: func(err error) {
		if errors.Is(err, ErrVerify) {
			failed.Add(1)
			after = readSidecar(t, dst)
		}
	}})
	st, err := Pull(t.Context(), addr, "img", dst, o)
	require.NoError(t, err)
	require.Equal(t, int32(1), failed.Load(), "the resumed attempt ended with a verify error")
	require.Equal(t, stateIncomplete, after.State)
	require.Zero(t, after.Done, "the checkpoint no longer covers the bad chunk")
	require.Equal(t, 2, st.Attempts)
	require.True(t, st.ReadBack)
	requireSame(t, src, dst)
}

// retryHook is a slog handler calling fn with the error of every retried
// attempt (withRetries logs it before the next attempt starts).
type retryHook struct{ fn func(error) }

func (h *retryHook) Enabled(context.Context, slog.Level) bool { return true }
func (h *retryHook) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "sync attempt failed, retrying" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "err" {
			h.fn(err)
		}
		return true
	})
	return nil
}
func (h *retryHook) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *retryHook) WithGroup(string) slog.Handler      { return h }

// TestReadBackAfterResume: a resumed read-back sync checks the whole file
// on its first attempt: the sender digests the chunks the resume skipped,
// so the stored prefix is checked against the source, not trusted.
func TestReadBackAfterResume(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, nil)
	src := filepath.Join(root, "img")
	require.NoError(t, writeImage(src, 128<<20, 0.6, 8, 9))
	m, _, err := sparse.ReadMap(t.Context(), src)
	require.NoError(t, err)
	dst := filepath.Join(local, "dst")
	o := clientOpts()
	o.Compress = CompressNone
	o.ReadBack = ReadBackOn
	_, err = Pull(t.Context(), newCutProxy(t, addr, m.Bytes()*2/3).addr(), "img", dst, o)
	require.Error(t, err)
	done := readSidecar(t, dst).Done
	require.Positive(t, done)
	st, err := Pull(t.Context(), addr, "img", dst, o)
	require.NoError(t, err)
	require.Equal(t, 1, st.Attempts)
	require.Equal(t, done, st.ResumedFrom)
	require.True(t, st.ReadBack && st.Verified)
	requireSame(t, src, dst)
}

// TestFullFilesystemReportsWriteError: a sync into a full filesystem (an
// 8 MiB tmpfs) fails, after its retries, with the write's ENOSPC error,
// not with the sidecar error of a retry that could not even mark the
// target (push: the client may see the cut before the server's ERROR and
// retry; pull: the local ENOSPC is retried).
func TestFullFilesystemReportsWriteError(t *testing.T) {
	loopfs.NeedRoot(t)
	full, local := filepath.Join(t.TempDir(), "full"), t.TempDir()
	require.NoError(t, os.Mkdir(full, 0o755))
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", full).CombinedOutput()
	require.NoError(t, err, string(out))
	t.Cleanup(func() { _ = exec.Command("umount", full).Run() })
	addrFull, _ := startServer(t, full, nil)
	addrLocal, _ := startServer(t, local, nil)
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 64<<20, 0.6, 8, 10))
	o := clientOpts()
	o.MaxAttempts = 4
	_, err = PushFile(t.Context(), addrFull, src, "img", o)
	require.ErrorIs(t, err, ErrRemote)
	require.Contains(t, err.Error(), "writing img at")
	require.Contains(t, err.Error(), "no space left on device")
	require.NoError(t, os.Remove(filepath.Join(full, "img")))
	_, err = Pull(t.Context(), addrLocal, "src", filepath.Join(full, "pulled"), o)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.Contains(t, err.Error(), "writing ")
	require.NotContains(t, err.Error(), "sidecar")
}

// TestReadBackOnPush: the read-back is asked for by the pushing client (by
// default when atomic) and made by the server; a resumed in-place push with
// ReadBackOn checks the whole file on its first attempt (the client
// digests the chunks the resume skips).
func TestReadBackOnPush(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	opt, ends := sessionEndsOpt()
	addr, _ := startServer(t, root, opt)
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 128<<20, 0.6, 8, 12))
	for _, c := range []struct {
		atomic bool
		mode   ReadBack
		want   bool
	}{{true, ReadBackAuto, true}, {false, ReadBackAuto, false}, {true, ReadBackOff, false}} {
		o := clientOpts()
		o.Atomic, o.ReadBack, o.FullCompare = c.atomic, c.mode, true
		st, err := PushFile(t.Context(), addr, src, "img", o)
		require.NoError(t, err)
		ev := waitSession(t, ends)
		require.Equal(t, c.want, st.ReadBack, "%+v", c)
		require.Equal(t, c.want, ev.Stats.ReadBack, "server side, %+v", c)
	}
	require.NoError(t, os.Remove(filepath.Join(root, "img")))
	m, _, err := sparse.ReadMap(t.Context(), src)
	require.NoError(t, err)
	o := clientOpts()
	o.Compress, o.ReadBack = CompressNone, ReadBackOn
	_, err = PushFile(t.Context(), newCutProxy(t, addr, m.Bytes()*2/3).addr(), src, "img", o)
	require.Error(t, err)
	waitSession(t, ends)
	st, err := PushFile(t.Context(), addr, src, "img", o)
	require.NoError(t, err)
	require.Equal(t, 1, st.Attempts)
	require.Positive(t, st.ResumedFrom)
	require.True(t, waitSession(t, ends).Stats.ReadBack)
	requireSame(t, src, filepath.Join(root, "img"))
}
