package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDisksBwlimit: disks takes --bwlimit (or "bwlimit" in --config, or
// --bwlimit-file), passes it to its moves (they wait on it: the throttled
// counter grows), shows it as a gauge, and re-reads --bwlimit-file on
// SIGHUP; a bad file keeps the limit in force and says why, a bad value at
// start is a usage error naming where it came from.
func TestDisksBwlimit(t *testing.T) {
	d1, d2, name := disksFixture(t)
	diskArgs := []string{"--disk", "d1=" + d1 + ",reserved=1T", "--disk", "d2=" + d2}
	_, errOut, code, _ := runCLI(t, append([]string{"disks", "--once", "--bwlimit", "fast"}, diskArgs...)...)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "--bwlimit: bad rate")
	cfg := filepath.Join(t.TempDir(), "disks.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"bwlimit": "fast"}`), 0o600))
	_, errOut, code, _ = runCLI(t, append([]string{"disks", "--once", "--config", cfg}, diskArgs...)...)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, cfg+": bwlimit: bad rate")
	_, err := os.Stat(filepath.Join(d1, name))
	require.NoError(t, err, "nothing moved")

	limit := filepath.Join(t.TempDir(), "bwlimit")
	require.NoError(t, os.WriteFile(limit, []byte("8M\n"), 0o644))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	metrics := ln.Addr().String()
	require.NoError(t, ln.Close())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stderr := &lockedBuffer{}
	g := &globalOpts{stdout: &lockedBuffer{}, stderr: stderr}
	opts := &disksOpts{disks: []string{"d1=" + d1 + ",reserved=1T", "d2=" + d2}, pressure: 90, antiAffinity: "soft",
		minimalAvailable: 25, overProvisioning: 100, interval: 50 * time.Millisecond, metrics: metrics, progress: "never",
		rateFile: limit}
	done := make(chan error, 1)
	go func() { done <- runDisks(ctx, g, opts, func(string) bool { return false }) }()
	defer func() { cancel(); require.ErrorIs(t, <-done, context.Canceled) }()

	// The move's 2 MiB are read three times (copy, verification of both
	// sides) at 8 MiB/s: it waits on the limit.
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(d2, name))
		return err == nil && counterValue(t, scrapeMetrics(t, metrics), "sparsesync_disks_moves_total", map[string]string{"result": "done"}) == 1
	}, time.Minute, 20*time.Millisecond)
	fams := scrapeMetrics(t, metrics)
	require.Positive(t, counterValue(t, fams, "sparsesync_throttled_seconds_total", nil))
	require.Equal(t, float64(8<<20), gaugeValue(t, metrics, "sparsesync_bwlimit_bytes_per_second"))

	require.NoError(t, os.WriteFile(limit, []byte("16M\n"), 0o644))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	waitFor(t, stderr, regexp.MustCompile(`(?m)^sparsesync: disks: SIGHUP: reloaded the limit file `+regexp.QuoteMeta(limit)+` \(16\.0 MiB/s\)$`))
	require.Equal(t, float64(16<<20), gaugeValue(t, metrics, "sparsesync_bwlimit_bytes_per_second"))
	require.NoError(t, os.WriteFile(limit, []byte("1e9\n"), 0o644))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	waitFor(t, stderr, regexp.MustCompile(fmt.Sprintf(`(?m)^sparsesync: disks: SIGHUP: --bwlimit-file: %s: qos: bad rate "1e9": want .*; keeping the limit of 16\.0 MiB/s$`, regexp.QuoteMeta(limit))))
	require.Equal(t, float64(16<<20), gaugeValue(t, metrics, "sparsesync_bwlimit_bytes_per_second"), "the old limit stays")
}
