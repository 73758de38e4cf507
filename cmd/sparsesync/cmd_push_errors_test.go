package main

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/errtext"
)

// retryLine is the announcement of a retry on stderr.
var retryLine = regexp.MustCompile(`(?m)^sparsesync: (push|pull): retrying in \d+(\.\d+)?m?s \(attempt (\d+)/6\): (.+)$`)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// countingProxy forwards every connection to addr and counts them: the
// number of attempts a client made, seen from outside the client. With
// resetFirst, the first connection is reset (RST) once its session is
// established.
type countingProxy struct {
	ln    net.Listener
	conns atomic.Int32
}

func newCountingProxy(t *testing.T, addr string, resetFirst bool) *countingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &countingProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := p.conns.Add(1)
			go p.forward(c, addr, resetFirst && n == 1)
		}
	}()
	return p
}

func (p *countingProxy) addr() string { return p.ln.Addr().String() }

// TestNetworkPermanentErrorsFailAtOnce: every failure that another attempt
// cannot cure ends the first time, with exit status 1, one line on stderr
// naming the cause, and no retry: none announced (the default --retries 5
// is in force) and, where a server is involved, exactly one connection
// reached it (counted by a proxy in front of it).
func TestNetworkPermanentErrorsFailAtOnce(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	tok := writeToken(t, dir)
	certFile, keyFile, pin := selfSigned(t, dir)
	plainAddr, _ := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", tokenFile: tok})
	tlsAddr, _ := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", tokenFile: tok, tlsCert: certFile, tlsKey: keyFile})
	plain, tlsSrv := newCountingProxy(t, plainAddr, false), newCountingProxy(t, tlsAddr, false)
	src := filepath.Join(dir, "src.img")
	sparseFile(t, src, 1<<20, map[int64]string{0: "a"})
	sparseFile(t, filepath.Join(root, "there.img"), 1<<20, map[int64]string{0: "b"})
	aFile := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(aFile, []byte("x"), 0o600))
	otherTok := writeToken(t, t.TempDir())
	wrongPin := strings.Repeat("00", 32)

	for _, tc := range []struct {
		name  string
		args  []string
		want  string         // in the error line
		proxy *countingProxy // the server's proxy; nil: no server reached
	}{
		{"nothing listening", []string{"push", "--token-file", tok, src, closedPort(t), "x.img"}, "connection refused", nil},
		{"unknown host", []string{"push", "--token-file", tok, src, "host.invalid:7373", "x.img"}, "host.invalid", nil},
		{"unknown port", []string{"push", "--token-file", tok, src, "127.0.0.1:no-such-service", "x.img"}, "unknown port", nil},
		{"plain client, TLS server", []string{"push", "--token-file", tok, src, tlsSrv.addr(), "x.img"}, "push " + src, tlsSrv},
		{"TLS client, plain server", []string{"push", "--token-file", tok, "--tls-pin", pin, src, plain.addr(), "x.img"}, "TLS handshake", plain},
		{"pin mismatch", []string{"push", "--token-file", tok, "--tls-pin", wrongPin, src, tlsSrv.addr(), "x.img"}, "does not match the pin", tlsSrv},
		{"wrong token", []string{"push", "--token-file", otherTok, src, plain.addr(), "x.img"}, "authentication failed", plain},
		{"missing remote file", []string{"pull", "--token-file", tok, plain.addr(), "nope.img", filepath.Join(dir, "out.img")}, "no such remote file", plain},
		{"local destination under a file (ENOTDIR)", []string{"pull", "--token-file", tok, plain.addr(), "there.img", filepath.Join(aFile, "out.img")}, "not a directory", plain},
		{"missing source", []string{"push", "--token-file", tok, filepath.Join(dir, "nope"), plain.addr(), "x.img"}, filepath.Join(dir, "nope"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain.conns.Store(0)
			tlsSrv.conns.Store(0)
			stdout, stderr, code, _ := runCLI(t, tc.args...)
			require.Equal(t, 1, code, stderr)
			require.Empty(t, stdout)
			require.NotRegexp(t, "retrying", stderr, "a permanent error is not retried")
			require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			require.Contains(t, stderr, tc.want)
			require.NotContains(t, stderr, "tcpsync: ", "no package prefix: %q", stderr)
			require.NotContains(t, stderr, "dial: dial", "no doubled prefix: %q", stderr)
			require.True(t, strings.HasPrefix(stderr, "sparsesync: "+tc.args[0]+" "), stderr)
			want := int32(0)
			if tc.proxy != nil {
				want = 1
				require.Eventually(t, func() bool { return tc.proxy.conns.Load() >= 1 }, 10*time.Second, time.Millisecond)
			}
			require.Equal(t, want, plain.conns.Load()+tlsSrv.conns.Load(), "connections that reached a server")
		})
	}
	_, err := os.Stat(filepath.Join(root, "x.img"))
	require.ErrorIs(t, err, os.ErrNotExist, "no failed push created its target")

	t.Run("local destination not writable (EACCES)", func(t *testing.T) {
		pullNotWritable(t, root)
	})
}

// pullNotWritable pulls into a directory the caller may not write: as
// root (which may write anywhere) the built binary runs as uid 65534.
// It fails at once (EACCES), in one line, with one connection.
func pullNotWritable(t *testing.T, root string) {
	sparseFile(t, filepath.Join(root, "open.img"), 1<<20, map[int64]string{0: "c"})
	addr, _ := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", noAuth: true})
	p := newCountingProxy(t, addr, false)
	base, err := os.MkdirTemp(reachableTempDir(), "sparsesync-eacces-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o555))
	dst := filepath.Join(base, "out.img")
	args := []string{"pull", "--no-auth", p.addr(), "open.img", dst}
	var stdout, stderr string
	var code int
	if os.Geteuid() == 0 {
		if testing.Short() {
			t.Skip("as root: builds the binary to run it as uid 65534 (-short)")
		}
		c := exec.Command(buildBinary(t), args...)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var out, errOut strings.Builder
		c.Stdout, c.Stderr = &out, &errOut
		_ = c.Run()
		stdout, stderr, code = out.String(), errOut.String(), c.ProcessState.ExitCode()
	} else {
		stdout, stderr, code, _ = runCLI(t, args...)
	}
	require.Equal(t, 1, code, stderr)
	require.Empty(t, stdout)
	require.NotRegexp(t, "retrying", stderr)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
	require.Contains(t, stderr, "permission denied")
	require.Contains(t, stderr, dst)
	require.LessOrEqual(t, p.conns.Load(), int32(1), "at most one attempt reached the server")
	require.NoFileExists(t, dst)
}

// forward copies between the client c and a new connection to addr; with
// reset, it resets c once the session is established.
func (p *countingProxy) forward(c net.Conn, addr string, reset bool) {
	defer c.Close()
	s, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer s.Close()
	go func() { _, _ = io.Copy(s, c); s.Close() }()
	if !reset {
		_, _ = io.Copy(c, s)
		return
	}
	// Let the handshake through (server hello and proof, about 100 bytes),
	// then reset the client's connection.
	buf := make([]byte, 4096)
	total := 0
	for total < 100 {
		n, err := s.Read(buf)
		if err != nil {
			return
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return
		}
		total += n
	}
	// The server's next bytes answer the client's OPEN, which the client
	// sends only once it has taken the greeting: forward them, then reset.
	// The session is established by then, whatever the machine's load.
	if n, err := s.Read(buf); err != nil {
		return
	} else if _, err := c.Write(buf[:n]); err != nil {
		return
	}
	_ = c.(*net.TCPConn).SetLinger(0)
}

// TestNetworkTransientErrorIsRetried: a connection reset once the session
// is established is retried, announced on stderr, and the push succeeds.
func TestNetworkTransientErrorIsRetried(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	tok := writeToken(t, dir)
	addr, _ := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", tokenFile: tok})
	p := newCountingProxy(t, addr, true)
	src := filepath.Join(dir, "src.img")
	sparseFile(t, src, 8<<20, map[int64]string{0: "a", 4 << 20: "b"})

	stdout, stderr, code, _ := runCLI(t, "push", "--token-file", tok, src, p.ln.Addr().String(), "vm1/disk.img")
	require.Equal(t, 0, code, stderr)
	m := retryLine.FindAllStringSubmatch(stderr, -1)
	require.Len(t, m, 1, "one retry announced: %q", stderr)
	require.Equal(t, "2", m[0][3])
	require.Contains(t, []string{"connection reset by peer", "broken pipe", "connection closed by the peer"}, m[0][4])
	require.Contains(t, stdout, "pushed "+src)
	require.GreaterOrEqual(t, p.conns.Load(), int32(2))
	a, err := os.ReadFile(src)
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "vm1", "disk.img"))
	require.NoError(t, err)
	require.Equal(t, a, b)
}

// TestMessagesSayWhatUsersCanActOn: file types in words, not Go mode
// strings, on local and remote targets; no package prefix repeated.
func TestMessagesSayWhatUsersCanActOn(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "vm1"), 0o755))
	addr, _ := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", noAuth: true})
	src := filepath.Join(dir, "src.img")
	sparseFile(t, src, 1<<20, map[int64]string{0: "a"})
	modeString := regexp.MustCompile(`\b[dDLpSc-]*[-r][-w][-x][-r][-w][-x][-r][-w][-x]\b|[Dd]c?-{9}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"local", src, "/dev/null"}, "character device"},
		{[]string{"local", "/dev/zero", filepath.Join(dir, "z.img")}, "/dev/zero: not a regular file or block device (character device)"},
		{[]string{"local", "--atomic", src, filepath.Join(dir, "gone", "dst.img")}, "create temporary copy of " + filepath.Join(dir, "gone", "dst.img") + ": no such file or directory"},
		{[]string{"push", "--no-auth", src, addr, "vm1"}, `"vm1" is a directory`},
		{[]string{"pull", "--no-auth", addr, "vm1", filepath.Join(dir, "out")}, `"vm1" is a directory`},
		{[]string{"balance", "-t", filepath.Join(dir, "nofile")}, "sparsesync: balance: open " + filepath.Join(dir, "nofile") + ": no such file"},
		{[]string{"squeeze", "-t", filepath.Join(dir, "nofile")}, "sparsesync: squeeze: open " + filepath.Join(dir, "nofile") + ": no such file"},
	} {
		_, stderr, code, _ := runCLI(t, tc.args...)
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, tc.want)
		require.NotRegexp(t, modeString, stderr)
		require.NotContains(t, stderr, ".sparsesync-", "no temporary name the user never gave")
		for _, p := range errtext.Packages {
			require.NotContains(t, stderr, p+": ", "no package prefix in %q", stderr)
		}
	}
}
