package main

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/tcpsync"
)

// TestServeSIGTERMWithinASecond is issue 23's shutdown point through the
// real signal path: a serve process holding 32 silent connections and a
// push in progress exits within a second of SIGTERM (hole 3 measured 46 s
// with a deep OPEN under way; such names are now refused outright, and
// every loop working for a peer watches the context).
func TestServeSIGTERMWithinASecond(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary (-short)")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	c := exec.Command(bin, "serve", "--root", root, "--no-auth", "--listen", "127.0.0.1:0")
	stderr, err := c.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Process.Kill() })
	sc := bufio.NewScanner(stderr)
	require.True(t, sc.Scan())
	m := regexp.MustCompile(`on (127\.0\.0\.1:\d+) `).FindStringSubmatch(sc.Text())
	require.NotNil(t, m, sc.Text())
	addr := m[1]
	for i := range 32 { // from 127.0.0.2-9 (127.0.0.1, the push's, keeps its per-address room)
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%8))}}
		conn, err := d.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
	}
	src := filepath.Join(dir, "src")
	sparseFile(t, src, 256<<20, map[int64]string{0: "a", 64 << 20: "b", 200 << 20: "c"})
	f, err := os.OpenFile(src, os.O_WRONLY, 0)
	require.NoError(t, err)
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + i>>9)
	}
	for off := int64(0); off < 96<<20; off += 1 << 20 {
		_, err := f.WriteAt(buf, off)
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())
	pushed := make(chan error, 1)
	go func() {
		_, err := tcpsync.PushFile(t.Context(), addr, src, "img", &tcpsync.Options{NoAuth: true, MaxAttempts: 1})
		pushed <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		select {
		case err := <-pushed:
			t.Fatalf("the push ended before the signal: %v", err)
		default:
		}
		if _, err := os.Stat(filepath.Join(root, "img")); err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the push did not start")
	}

	start := time.Now()
	require.NoError(t, c.Process.Signal(syscall.SIGTERM))
	_ = c.Wait()
	took := time.Since(start)
	t.Logf("serve exited %v after SIGTERM (exit status %d)", took, c.ProcessState.ExitCode())
	require.Equal(t, 130, c.ProcessState.ExitCode())
	require.Less(t, took, time.Second)
	<-pushed
}
