package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for a server goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveOutput runs serve with opts until it is ready, stops it, and
// returns what it wrote on stderr.
func serveOutput(t *testing.T, opts serveOptions) string {
	t.Helper()
	var errOut syncBuffer
	g := &globalOpts{stdout: &bytes.Buffer{}, stderr: &errOut}
	ready := make(chan struct{}, 1)
	opts.ready = func(_, _ string) { ready <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, g, opts) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not start")
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled) // stopped by the signal: exit 130
	return errOut.String()
}

// TestServeAnnouncesAddressAndPin: serve on 0.0.0.0 says 0.0.0.0 (not
// [::]) and prints the TLS pin a client's --tls-pin accepts (the SHA-256
// of the certificate's DER, computed independently by selfSigned).
func TestServeAnnouncesAddressAndPin(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	certFile, keyFile, pin := selfSigned(t, dir)
	tok := writeToken(t, dir)
	out := serveOutput(t, serveOptions{root: root, listen: "0.0.0.0:0", tokenFile: tok, tlsCert: certFile, tlsKey: keyFile})
	require.Regexp(t, regexp.MustCompile(`(?m)^sparsesync: serving `+regexp.QuoteMeta(root)+` on 0\.0\.0\.0:\d+ \(token authentication, TLS 1\.3\)$`), out)
	require.Contains(t, out, "sparsesync: TLS certificate pin (SHA-256 of its DER): "+pin+"\n")
	require.NotContains(t, out, "[::]")
}

// TestServePprofWarning is issue 23's lower-severity item: --pprof with a
// metrics address reachable from the network prints a warning line; on a
// loopback address it does not.
func TestServePprofWarning(t *testing.T) {
	for _, c := range []struct {
		metrics string
		warn    bool
	}{{"0.0.0.0:0", true}, {"127.0.0.1:0", false}} {
		out := serveOutput(t, serveOptions{root: t.TempDir(), listen: "127.0.0.1:0", noAuth: true, metrics: c.metrics, pprof: true})
		if c.warn {
			require.Regexp(t, regexp.MustCompile(`(?m)^sparsesync: warning: --pprof serves Go profiles .* to anyone who can reach 0\.0\.0\.0:\d+; bind --metrics to a loopback or private address$`), out)
		} else {
			require.NotContains(t, out, "warning", c.metrics)
		}
	}
}

// TestServeTokenFIFO is hole 5 through the CLI: serve and push given a
// FIFO as --token-file fail at once naming the file (they used to block
// in the open, deaf to SIGTERM).
func TestServeTokenFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "token")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	done := make(chan error, 2)
	g, _ := testGlobals()
	go func() {
		done <- runServe(t.Context(), g, serveOptions{root: dir, listen: "127.0.0.1:0", tokenFile: fifo})
	}()
	go func() {
		done <- runPush(t.Context(), g, netOptions{tokenFile: fifo, compress: "auto"}, filepath.Join(dir, "none"), "127.0.0.1:1", "x")
	}()
	for range 2 {
		select {
		case err := <-done:
			require.ErrorContains(t, err, fifo+" is not a regular file")
		case <-time.After(10 * time.Second):
			t.Fatal("a FIFO token file blocked the command")
		}
	}
}
