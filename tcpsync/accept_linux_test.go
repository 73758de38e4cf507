package tcpsync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const nofileHelperEnv = "TCPSYNC_HELPER_NOFILE"

// TestHelperNofileServer is not a test: run with
// TCPSYNC_HELPER_NOFILE=root,addrfile it serves root with at most 64 open
// file descriptors, logging at debug level to stderr, until killed. If
// Serve returns, it says so and exits with status 3.
func TestHelperNofileServer(t *testing.T) {
	spec := os.Getenv(nofileHelperEnv)
	if spec == "" {
		t.Skip("helper process for TestLowDescriptorLimit")
	}
	root, addrFile, _ := strings.Cut(spec, ",")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	lim.Cur = 64
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	require.NoError(t, os.WriteFile(addrFile+".tmp", []byte(ln.Addr().String()), 0o600))
	require.NoError(t, os.Rename(addrFile+".tmp", addrFile))
	srv := &Server{Root: root, Token: testToken,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	err = srv.Serve(context.Background(), ln)
	fmt.Fprintf(os.Stderr, "Serve returned: %v\n", err)
	os.Exit(3)
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestLowDescriptorLimit is hole 9 as reported: a server process limited
// to 64 descriptors gets 120 silent connections from 8 loopback addresses
// (more than it can hold open), and a push from a ninth address still
// completes. The server used to exit on the first accept error other than
// a timeout (EMFILE here); with accept errors retried it stayed up, but its
// pending connections took every descriptor and the push failed opening
// its target with EMFILE, until the caps were fitted to the limit.
func TestLowDescriptorLimit(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addrFile := filepath.Join(t.TempDir(), "addr")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperNofileServer$")
	cmd.Env = append(os.Environ(), nofileHelperEnv+"="+root+","+addrFile)
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	var addr []byte
	require.Eventually(t, func() bool {
		var err error
		addr, err = os.ReadFile(addrFile)
		return err == nil
	}, 20*time.Second, 10*time.Millisecond)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 120 {
		c, err := dialFrom(ctx, 2+i%8, string(addr))
		require.NoError(t, err)
		conns = append(conns, c)
	}
	// A probe from a tenth address is accepted after all of them: once it
	// has its HELLO answered, the server has taken in the whole flood. It
	// may be refused as busy first (a newcomer is refused while every
	// pending connection is within its greeting grace), as a client is,
	// and tries again.
	var err error
	for range 100 {
		var probe net.Conn
		probe, err = dialFrom(ctx, 10, string(addr))
		require.NoError(t, err)
		require.NoError(t, probe.SetDeadline(time.Now().Add(time.Minute)))
		_, err = clientHandshake(ctx, newFramer(probe), testToken, false)
		probe.Close()
		if !errors.Is(err, ErrBusy) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, err, "server log:\n%s", logs)

	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 8<<20, 0.5, 4, 11))
	o := clientOpts()
	o.MaxAttempts, o.MinBackoff, o.MaxBackoff = 9, 100*time.Millisecond, time.Second
	o.Dial = func(ctx context.Context, _, a string) (net.Conn, error) { return dialFrom(ctx, 1, a) }
	start := time.Now()
	st, err := PushFile(ctx, string(addr), src, "img", o)
	select {
	case err := <-exited:
		t.Fatalf("the server exited (%v):\n%s", err, logs)
	default:
	}
	require.NoError(t, err, "server log:\n%s", logs)
	t.Logf("push under a 64-descriptor limit and a flood: %v, %d attempt(s)", time.Since(start), st.Attempts)
	requireSame(t, src, filepath.Join(root, "img"))
}

// TestFitDescriptors: the caps leave room for sessions' files under a low
// descriptor limit and are untouched under a usual one.
func TestFitDescriptors(t *testing.T) {
	s := &Server{}
	s.setDefaults()
	s.fitDescriptors(64)
	require.Equal(t, 12, s.MaxPreAuth)
	require.Equal(t, 4, s.MaxSessions)
	require.LessOrEqual(t, fdsReserved+s.MaxPreAuth+fdsPerSession*s.MaxSessions, 64)
	require.LessOrEqual(t, s.MaxConns, s.MaxPreAuth+s.MaxSessions)
	require.LessOrEqual(t, s.MaxPreAuthPerHost, s.MaxPreAuth)
	u := &Server{}
	u.setDefaults()
	u.fitDescriptors(1 << 20)
	require.Equal(t, 64, u.MaxPreAuth)
	require.Equal(t, 64, u.MaxSessions)
	require.Equal(t, 128, u.MaxConns)
}
