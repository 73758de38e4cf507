package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sync"
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

// TestServeAnnouncesAddressAndPin: serve on 0.0.0.0 says 0.0.0.0 (not
// [::]) and prints the TLS pin a client's --tls-pin accepts (the SHA-256
// of the certificate's DER, computed independently by selfSigned).
func TestServeAnnouncesAddressAndPin(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	certFile, keyFile, pin := selfSigned(t, dir)
	tok := writeToken(t, dir)
	var errOut syncBuffer
	g := &globalOpts{stdout: &bytes.Buffer{}, stderr: &errOut}
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, g, serveOptions{root: root, listen: "0.0.0.0:0", tokenFile: tok, tlsCert: certFile, tlsKey: keyFile,
			ready: func(a, _ string) { ready <- a }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not start")
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled) // stopped by the signal: exit 130
	out := errOut.String()
	require.Regexp(t, regexp.MustCompile(`(?m)^sparsesync: serving `+regexp.QuoteMeta(root)+` on 0\.0\.0\.0:\d+ \(token authentication, TLS 1\.3\)$`), out)
	require.Contains(t, out, "sparsesync: TLS certificate pin (SHA-256 of its DER): "+pin+"\n")
	require.NotContains(t, out, "[::]")
}
