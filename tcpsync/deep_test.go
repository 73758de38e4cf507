package tcpsync

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime(t testing.TB) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// deepName is a name of n components ("top/a/a/…/x").
func deepName(top string, n int) string {
	return top + "/" + strings.Repeat("a/", n-2) + "x"
}

// TestDeepPathBounded is hole 3: one OPEN of a 2,000-component name
// (within 4,096 bytes) cost quadratic CPU (1,000 components: 5.5 s),
// left 1,999 directories behind and held up SIGTERM for 46 s. Now a name
// deeper than maxDepth is refused before anything is created, a name at
// the cap is walked once, and the CPU of 40 such OPENs stays far below
// one of the old ones.
func TestDeepPathBounded(t *testing.T) {
	root := t.TempDir()
	addr, _ := startServer(t, root, nil)
	cpu := cpuTime(t)
	for i := range 20 {
		for _, op := range []uint8{opPush, opPull} {
			err := rawOpen(t, addr, op, deepName("deep", 2000))
			require.ErrorIs(t, err, ErrBadPath, "attempt %d", i)
			require.ErrorContains(t, err, "more than 64 components")
		}
	}
	_, err := os.Lstat(filepath.Join(root, "deep"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing created for a refused OPEN")
	require.ErrorIs(t, rawOpen(t, addr, opPush, deepName("cap", maxDepth+1)), ErrBadPath)
	// At the cap: created, with one walk.
	require.NoError(t, rawOpen(t, addr, opPush, deepName("cap", maxDepth)))
	st, err := os.Stat(filepath.Join(root, deepName("cap", maxDepth)))
	require.NoError(t, err)
	require.True(t, st.Mode().IsRegular())
	used := cpuTime(t) - cpu
	t.Logf("CPU for 42 refused deep OPENs and one at the cap of %d: %v", maxDepth, used)
	require.Less(t, used, 3*time.Second, "the deep OPENs cost more CPU than a bounded walk can")
}

// TestRefusedOpenCreatesNothing: a walk that fails (a cancelled context
// at the first level, a file in the way) leaves no directory behind, and
// the walk refuses a symlink on the way or at the end.
func TestRefusedOpenCreatesNothing(t *testing.T) {
	root := t.TempDir()
	r, err := os.OpenRoot(root)
	require.NoError(t, err)
	defer r.Close()
	s := &Server{root: r}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = s.walkDirs(ctx, "n1/n2/n3/x", true)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, os.WriteFile(filepath.Join(root, "file"), nil, 0o600))
	require.NoError(t, os.Symlink("/tmp", filepath.Join(root, "link")))
	_, err = s.walkDirs(t.Context(), "file/n2/x", true)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = s.walkDirs(t.Context(), "link/n2/x", true)
	require.ErrorIs(t, err, ErrPathOutsideRoot)
	_, err = s.walkDirs(t.Context(), "link", true)
	require.ErrorIs(t, err, ErrPathOutsideRoot)
	ents, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Len(t, ents, 2, "only the file and the link: %v", ents)
	// Created, then undone: what a refused OPEN does.
	w, err := s.walkDirs(t.Context(), "m1/m2/m3/x", true)
	require.NoError(t, err)
	require.Equal(t, []string{"m1", "m1/m2", "m1/m2/m3"}, w.created)
	w.undo(s)
	_, err = os.Lstat(filepath.Join(root, "m1"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestShutdownWithinASecond is hole 3's SIGTERM (serve maps SIGTERM to the
// cancellation of Serve's context, signal.NotifyContext in main.go): with
// sessions mid-handshake, mid-map and mid-stream, one of them refusing to
// read, Serve returns within a second of the cancel.
func TestShutdownWithinASecond(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	srv := &Server{Root: root, Token: testToken, FailDelay: 10 * time.Millisecond}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()

	// Silent connections.
	for range 8 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
	}
	// A session that sent SRCINFO and part of a map, then nothing.
	f, _ := rawSession(t, addr, testToken)
	require.NoError(t, f.send(wire.Open, 0, openBody(opPush, 0, 4096, "mid-map")))
	_, _, err = f.expect(wire.Opened)
	require.NoError(t, err)
	require.NoError(t, f.writeFrame(wire.SrcInfo, 0, srcInfoBody(1<<40, 4096, "")))
	require.NoError(t, f.send(wire.Extents, 0, encodedMap(1<<40, 40000)[:wire.MaxFrame]))
	// A real push, in progress (a large file).
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 256<<20, 0.9, 8, 5))
	pushed := make(chan error, 1)
	go func() {
		_, err := PushFile(t.Context(), addr, src, "big", clientOpts())
		pushed <- err
	}()
	require.Eventually(t, func() bool { return srv.activeSessions() == 2 }, 20*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond)

	start := time.Now()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	took := time.Since(start)
	t.Logf("Serve returned %v after the cancel", took)
	require.Less(t, took, time.Second)
	// The push completed, or failed with an error its retry takes
	// (ErrShutdown, or a reset: the server does not linger for a peer's
	// reading once it is shutting down).
	if err := <-pushed; err != nil {
		require.True(t, retryable(err, true), "%v", err)
	}
}
