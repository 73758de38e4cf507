package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/tcpsync"
)

// waitFor waits until stderr matches re (serve writes the line after the
// client is answered); a minute is no speed limit, only a hung test's end.
func waitFor(t *testing.T, b *lockedBuffer, re *regexp.Regexp) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !re.MatchString(b.String()); {
		if time.Now().After(deadline) {
			t.Fatalf("no line matching %s in:\n%s", re, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServeLogsSessionsAuthFailuresAndReloadsOnHUP: serve as a service.
// Without -v it logs one line per session (address, file, bytes, result)
// and one fixed-format line per failed authentication with the client's
// address (for fail2ban); SIGHUP reloads the token file instead of
// killing the process (it exited 129).
func TestServeLogsSessionsAuthFailuresAndReloadsOnHUP(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	tok := writeToken(t, dir)
	oldTok, err := os.ReadFile(tok)
	require.NoError(t, err)
	newTokFile := writeToken(t, t.TempDir())
	newTok, err := os.ReadFile(newTokFile)
	require.NoError(t, err)
	oldTokFile := filepath.Join(t.TempDir(), "old")
	require.NoError(t, os.WriteFile(oldTokFile, oldTok, 0o600))

	stderr := &lockedBuffer{}
	g := &globalOpts{stdout: &bytes.Buffer{}, stderr: stderr}
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, g, serveOptions{root: root, listen: "127.0.0.1:0", tokenFile: tok,
			ready: func(a, _ string) { ready <- a }})
	}()
	defer func() { cancel(); require.ErrorIs(t, <-done, context.Canceled) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}

	src := filepath.Join(dir, "src.img")
	sparseFile(t, src, 1<<20, map[int64]string{0: "a"})
	push := func(tokenFile, remote string) error {
		cg, _ := testGlobals()
		return runPush(t.Context(), cg, netOptions{tokenFile: tokenFile, compress: "auto", blockSize: 4096, retries: 0}, src, addr, remote)
	}
	require.NoError(t, push(tok, "a.img"))
	waitFor(t, stderr, regexp.MustCompile(`level=INFO msg="session done" remote=127\.0\.0\.1:\d+ op=push path=a\.img copied=4096 unchanged=0 `))

	require.ErrorIs(t, push(newTokFile, "b.img"), tcpsync.ErrUnauthorized)
	waitFor(t, stderr, regexp.MustCompile(`(?m)^time=\S+ level=WARN msg="authentication failed" remote=127\.0\.0\.1:\d+$`))

	// SIGHUP: the token file now holds the new token.
	require.NoError(t, os.WriteFile(tok, newTok, 0o600))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	waitFor(t, stderr, regexp.MustCompile(`(?m)^sparsesync: serve: SIGHUP: reloaded the token file `+regexp.QuoteMeta(tok)+`$`))
	require.NoError(t, push(newTokFile, "c.img"))
	require.ErrorIs(t, push(oldTokFile, "d.img"), tcpsync.ErrUnauthorized)

	// A token file broken by mistake is reported; the token in use stays.
	require.NoError(t, os.WriteFile(tok, []byte("short\n"), 0o600))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	waitFor(t, stderr, regexp.MustCompile(`(?m)^sparsesync: serve: SIGHUP: .*; keeping the previous token$`))
	require.NoError(t, push(newTokFile, "e.img"))
	select {
	case err := <-done:
		t.Fatalf("serve ended: %v", err)
	default:
	}
}
