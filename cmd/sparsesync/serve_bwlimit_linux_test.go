package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// gaugeValue is the value of the unlabelled gauge name.
func gaugeValue(t *testing.T, metrics, name string) float64 {
	t.Helper()
	f := scrapeMetrics(t, metrics)[name]
	require.NotNil(t, f, name)
	require.Len(t, f.GetMetric(), 1, name)
	return f.GetMetric()[0].GetGauge().GetValue()
}

// TestServeReloadsBwlimitFileOnHUP: serve --bwlimit-file reads the node's
// limit at start and again on SIGHUP (shown by the limit gauge); a file
// broken by mistake is reported and the limit in force stays; a bad file
// at start is a usage error naming it.
func TestServeReloadsBwlimitFileOnHUP(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	limit := filepath.Join(dir, "bwlimit")
	require.NoError(t, os.WriteFile(limit, []byte("100M\n"), 0o644))

	stderr := &lockedBuffer{}
	g := &globalOpts{stdout: &bytes.Buffer{}, stderr: stderr}
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, g, serveOptions{root: root, listen: "127.0.0.1:0", noAuth: true, metrics: "127.0.0.1:0",
			rateFile: limit, ready: func(_, m string) { ready <- m }})
	}()
	defer func() { cancel(); require.ErrorIs(t, <-done, context.Canceled) }()
	var metrics string
	select {
	case metrics = <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	const mib = 1 << 20
	require.Equal(t, 100.0*mib, gaugeValue(t, metrics, "sparsesync_bwlimit_bytes_per_second"))

	require.NoError(t, os.WriteFile(limit, []byte("50M\n"), 0o644))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	waitFor(t, stderr, regexp.MustCompile(`(?m)^sparsesync: serve: SIGHUP: reloaded the limit file `+regexp.QuoteMeta(limit)+` \(50\.0 MiB/s\)$`))
	require.Equal(t, 50.0*mib, gaugeValue(t, metrics, "sparsesync_bwlimit_bytes_per_second"))

	require.NoError(t, os.WriteFile(limit, []byte("fast please\n"), 0o644))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	waitFor(t, stderr, regexp.MustCompile(`(?m)^sparsesync: serve: SIGHUP: --bwlimit-file: `+regexp.QuoteMeta(limit)+`: qos: bad rate "fast please": want .*; keeping the limit of 50\.0 MiB/s$`))
	require.Equal(t, 50.0*mib, gaugeValue(t, metrics, "sparsesync_bwlimit_bytes_per_second"), "the old limit stays")

	require.NoError(t, os.Remove(limit))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	waitFor(t, stderr, regexp.MustCompile(`(?m)^sparsesync: serve: SIGHUP: --bwlimit-file: open `+regexp.QuoteMeta(limit)+`: no such file or directory; keeping the limit of 50\.0 MiB/s$`))

	// At start, a bad file is refused: exit 2, naming the file.
	require.NoError(t, os.WriteFile(limit, []byte("-5\n"), 0o644))
	_, errOut, code, _ := runCLI(t, "serve", "--root", root, "--no-auth", "--listen", "127.0.0.1:0", "--bwlimit-file", limit)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, limit)
	_, errOut, code, _ = runCLI(t, "serve", "--root", root, "--no-auth", "--listen", "127.0.0.1:0", "--bwlimit-file", limit, "--bwlimit", "5M")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "exclusive")
}
