package main

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

// TestNetworkPermanentErrorsFailAtOnce: every failure that another attempt
// cannot cure ends the first time, with exit status 1, one line on stderr
// naming the cause, and no retry announced (the default --retries 5 is in
// force, so a retry would have been announced).
func TestNetworkPermanentErrorsFailAtOnce(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	tok := writeToken(t, dir)
	certFile, keyFile, pin := selfSigned(t, dir)
	plain, _ := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", tokenFile: tok})
	tlsAddr, _ := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", tokenFile: tok, tlsCert: certFile, tlsKey: keyFile})
	src := filepath.Join(dir, "src.img")
	sparseFile(t, src, 1<<20, map[int64]string{0: "a"})
	sparseFile(t, filepath.Join(root, "there.img"), 1<<20, map[int64]string{0: "b"})
	aFile := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(aFile, []byte("x"), 0o600))
	otherTok := writeToken(t, t.TempDir())
	wrongPin := strings.Repeat("00", 32)

	for _, tc := range []struct {
		name string
		args []string
		want string // in the error line
	}{
		{"nothing listening", []string{"push", "--token-file", tok, src, closedPort(t), "x.img"}, "connection refused"},
		{"unknown host", []string{"push", "--token-file", tok, src, "host.invalid:7373", "x.img"}, "host.invalid"},
		{"plain client, TLS server", []string{"push", "--token-file", tok, src, tlsAddr, "x.img"}, "push " + src},
		{"TLS client, plain server", []string{"push", "--token-file", tok, "--tls-pin", pin, src, plain, "x.img"}, "TLS handshake"},
		{"pin mismatch", []string{"push", "--token-file", tok, "--tls-pin", wrongPin, src, tlsAddr, "x.img"}, "does not match the pin"},
		{"wrong token", []string{"push", "--token-file", otherTok, src, plain, "x.img"}, "authentication failed"},
		{"missing remote file", []string{"pull", "--token-file", tok, plain, "nope.img", filepath.Join(dir, "out.img")}, "no such remote file"},
		{"local destination under a file (ENOTDIR)", []string{"pull", "--token-file", tok, plain, "there.img", filepath.Join(aFile, "out.img")}, "not a directory"},
		{"missing source", []string{"push", "--token-file", tok, filepath.Join(dir, "nope"), plain, "x.img"}, filepath.Join(dir, "nope")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code, _ := runCLI(t, tc.args...)
			require.Equal(t, 1, code, stderr)
			require.Empty(t, stdout)
			require.NotRegexp(t, "retrying", stderr, "a permanent error is not retried")
			require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			require.Contains(t, stderr, tc.want)
			require.NotContains(t, stderr, "tcpsync: ", "no package prefix: %q", stderr)
			require.True(t, strings.HasPrefix(stderr, "sparsesync: "+tc.args[0]+" "), stderr)
		})
	}
	_, err := os.Stat(filepath.Join(root, "x.img"))
	require.ErrorIs(t, err, os.ErrNotExist, "no failed push created its target")
}

// resetProxy forwards connections to addr; the first one is reset (RST)
// after the first forwarded reply, once the session is established.
type resetProxy struct {
	ln    net.Listener
	conns atomic.Int32
}

func newResetProxy(t *testing.T, addr string) *resetProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &resetProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := p.conns.Add(1)
			go p.forward(c, addr, n == 1)
		}
	}()
	return p
}

func (p *resetProxy) forward(c net.Conn, addr string, reset bool) {
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
	time.Sleep(50 * time.Millisecond) // let the client start its session
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
	p := newResetProxy(t, addr)
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
		{[]string{"push", "--no-auth", src, addr, "vm1"}, `"vm1" is a directory`},
		{[]string{"pull", "--no-auth", addr, "vm1", filepath.Join(dir, "out")}, `"vm1" is a directory`},
	} {
		_, stderr, code, _ := runCLI(t, tc.args...)
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, tc.want)
		require.NotRegexp(t, modeString, stderr)
		for _, p := range libraryPrefixes {
			require.NotContains(t, stderr, p, "no package prefix in %q", stderr)
		}
	}
}
