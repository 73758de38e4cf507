package tcpsync

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/wire"
)

// rawSession dials addr and authenticates with token, returning the framer
// for tests that speak the protocol by hand: whole maps up front (a peer
// without wire.FeatWindows; rawWindowSession speaks windows).
func rawSession(t *testing.T, addr string, token []byte) (*framer, net.Conn) {
	t.Helper()
	return rawSessionWith(t, addr, token, true)
}

// rawSessionWith is rawSession, announcing windows unless noWindows.
func rawSessionWith(t *testing.T, addr string, token []byte, noWindows bool, setup ...func(*framer)) (*framer, net.Conn) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
	f := newFramer(c)
	f.noWindows = noWindows
	for _, fn := range setup {
		fn(f)
	}
	_, err = clientHandshake(t.Context(), f, token, false)
	require.NoError(t, err)
	return f, c
}

// sendAnySize sends a frame of type t, or, when body is over t's limit
// (writeFrame refuses it), only its header by hand with a valid tag: the
// limit, not the MAC, must refuse it.
func sendAnySize(f *framer, t wire.Type, body []byte) error {
	if len(body) <= t.Limit() {
		return f.send(t, 0, body)
	}
	h := make([]byte, wire.HeaderLen)
	h[0] = byte(t)
	binary.LittleEndian.PutUint32(h[4:], uint32(len(body)))
	_, err := f.c.Write(append(h, f.smac.HeaderTag(h)...))
	return err
}

// readUntilError reads frames until the peer's ERROR (decoded) or the
// end of the connection.
func readUntilError(f *framer) error {
	for {
		ft, _, body, err := f.readFrame()
		if err != nil {
			return err
		}
		if ft == wire.Error {
			return decodeError(body)
		}
	}
}

// rawOpen sends OPEN for name without the client's own validation.
func rawOpen(t *testing.T, addr string, op uint8, name string) error {
	f, _ := rawSession(t, addr, testToken)
	require.NoError(t, f.send(wire.Open, 0, openBody(op, 0, 4096, name)))
	_, _, err := f.expect(wire.Opened)
	return err
}

func snapshot(t *testing.T, dir string) map[string]int64 {
	out := map[string]int64{}
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out[p] = fi.Size()
		return nil
	}))
	return out
}

func TestWrongTokenWritesNothing(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, nil)
	src := writeLayout(t, local, "src", layout.Layout{Size: 1 << 20, Data: layout.Ranges(0, 65536)})
	o := clientOpts()
	o.Token = []byte("another-token-another-token-another-token")
	_, err := PushFile(t.Context(), addr, src, "img", o)
	require.ErrorIs(t, err, ErrUnauthorized)
	_, err = Pull(t.Context(), addr, "img", filepath.Join(local, "dst"), o)
	require.ErrorIs(t, err, ErrUnauthorized)
	require.Empty(t, snapshot(t, root)[filepath.Join(root, "img")])
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Empty(t, entries, "a rejected client writes nothing")

	// A server without a token refuses clients that hold one (no mutual auth),
	// and a server with a token refuses clients without.
	naddr, _ := startServer(t, root, func(s *Server) { s.NoAuth = true })
	_, err = PushFile(t.Context(), naddr, src, "img", clientOpts())
	require.ErrorIs(t, err, ErrUnauthorized)
	_, err = PushFile(t.Context(), addr, src, "img", &Options{NoAuth: true, MaxAttempts: 1})
	require.ErrorIs(t, err, ErrUnauthorized)
	st, err := PushFile(t.Context(), naddr, src, "img", &Options{NoAuth: true, MaxAttempts: 1})
	require.NoError(t, err)
	require.True(t, st.Verified)
}

func TestNoAuthOnlyOnLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	require.NoError(t, err)
	defer ln.Close()
	err = (&Server{Root: t.TempDir(), NoAuth: true}).Serve(t.Context(), ln)
	require.ErrorContains(t, err, "loopback")
}

func TestTokenFilePermissions(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tok")
	require.NoError(t, os.WriteFile(p, []byte(NewToken()+"\n"), 0o644))
	_, err := LoadToken(p)
	require.ErrorIs(t, err, ErrTokenFile)
	require.NoError(t, os.Chmod(p, 0o600))
	tok, err := LoadToken(p)
	require.NoError(t, err)
	require.Len(t, tok, 32)
	require.NoError(t, os.WriteFile(p, []byte("short"), 0o600))
	_, err = LoadToken(p)
	require.ErrorIs(t, err, ErrTokenFile)
}

// TestHostilePaths tries path traversal and special files; every attempt
// must be refused, nothing outside the root created or read.
func TestHostilePaths(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sub"), 0o755))
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret data"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "inside"), []byte("inside data"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "linkout")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "linkfile")))
	require.NoError(t, os.Symlink("inside", filepath.Join(root, "linkin")))
	require.NoError(t, os.Symlink("sub", filepath.Join(root, "linksub")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600))
	if err := syscall.Mknod(filepath.Join(root, "chardev"), syscall.S_IFCHR|0o600, 1<<8|3); err != nil { // like /dev/null
		// Without CAP_MKNOD (not root) the special file is a Unix socket.
		require.ErrorIs(t, err, syscall.EPERM)
		t.Log("mknod needs root: chardev is a Unix socket in this run")
		ln, err := net.Listen("unix", filepath.Join(root, "chardev"))
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
	}
	addr, _ := startServer(t, root, nil)
	before := snapshot(t, outside)
	rootBefore := snapshot(t, root)

	names := []string{
		"../x", "/etc/passwd", "a/../../x", "..", ".", "", "x\x00y", "x\ny", "x\r", "x\x7f",
		"linkout/x", "linkout/secret", "linkfile", "linkin", "linksub/x", "a//b", "./x", "x/.",
		"sub", "fifo", "chardev", strings.Repeat("a", 5000), strings.Repeat("b", 300), "img.tcpsync",
		"sub/../../outside/secret",
	}
	require.GreaterOrEqual(t, len(names), 20)
	pathErrs := []error{ErrBadPath, ErrPathOutsideRoot, ErrNotRegular, ErrNotFound}
	for _, op := range []uint8{opPush, opPull} {
		for _, name := range names {
			err := rawOpen(t, addr, op, name)
			require.Error(t, err, "op %d name %q", op, name)
			ok := false
			for _, pe := range pathErrs {
				ok = ok || errors.Is(err, pe)
			}
			require.True(t, ok, "op %d name %q: unexpected error %v", op, name, err)
		}
	}
	require.Equal(t, before, snapshot(t, outside), "nothing outside the root changed")
	require.Equal(t, rootBefore, snapshot(t, root), "nothing inside the root changed")
	secret, err := os.ReadFile(filepath.Join(outside, "secret"))
	require.NoError(t, err)
	require.Equal(t, "secret data", string(secret))

	// The public client refuses bad names before connecting.
	_, err = PushFile(t.Context(), addr, "/dev/null", "../x", clientOpts())
	require.ErrorIs(t, err, ErrBadPath)
}

// TestBadFramesEndOnlyThatSession sends malformed and oversized frames on
// some connections while a real push on the same server completes.
func TestBadFramesEndOnlyThatSession(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, func(s *Server) { s.HandshakeTimeout = 2 * time.Second })
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 64<<20, 0.3, 8, 5))

	bad := []struct {
		name string
		send func(f *framer) error
	}{
		{"unknown type", func(f *framer) error { return f.send(wire.Type(200), 0, []byte("x")) }},
		{"oversized frame", func(f *framer) error {
			h := make([]byte, 8)
			h[0] = byte(wire.Extents)
			binary.LittleEndian.PutUint32(h[4:], 1<<30)
			// A valid header tag: the limit, not the MAC, refuses it.
			_, err := f.c.Write(append(h, f.smac.HeaderTag(h)...))
			return err
		}},
		{"garbage open", func(f *framer) error { return f.send(wire.Open, 0, []byte{1, 2, 3}) }},
		{"huge size", func(f *framer) error {
			if err := f.send(wire.Open, 0, openBody(opPush, 0, 4096, "bad1")); err != nil {
				return err
			}
			if _, _, err := f.expect(wire.Opened); err != nil {
				return err
			}
			b := binary.LittleEndian.AppendUint64(nil, 1<<62)
			b = binary.LittleEndian.AppendUint32(b, 4096)
			b = binary.LittleEndian.AppendUint32(b, 0)
			return f.send(wire.SrcInfo, 0, wire.AppendBytes(b, nil))
		}},
		{"data outside", func(f *framer) error {
			if err := f.send(wire.Open, 0, openBody(opPush, 0, 4096, "bad2")); err != nil {
				return err
			}
			if _, _, err := f.expect(wire.Opened); err != nil {
				return err
			}
			b := binary.LittleEndian.AppendUint64(nil, 1<<20)
			b = binary.LittleEndian.AppendUint32(b, 4096)
			b = binary.LittleEndian.AppendUint32(b, 0)
			if err := f.writeFrame(wire.SrcInfo, 0, wire.AppendBytes(b, nil)); err != nil {
				return err
			}
			m := []byte{1, 0x80, 0x80, 0x40, 1, 0, 0x80, 0x20} // size 1 MiB, one extent [0, 4096)
			if err := f.writeFrame(wire.Extents, wire.FlagLast, m); err != nil {
				return err
			}
			d := binary.LittleEndian.AppendUint64(nil, 1<<40)
			d = binary.LittleEndian.AppendUint32(d, 4096)
			return f.send(wire.Data, 0, d, make([]byte, 4096))
		}},
	}
	var wg sync.WaitGroup
	var pushErr error
	wg.Go(func() {
		_, pushErr = PushFile(t.Context(), addr, src, "good", clientOpts())
	})
	for _, b := range bad {
		f, c := rawSession(t, addr, testToken)
		require.NoError(t, b.send(f), b.name)
		// The server answers with an ERROR (or at least closes); it never hangs.
		err := readUntilError(f)
		require.Error(t, err, b.name)
		var re *RemoteError
		if errors.As(err, &re) {
			require.True(t, errors.Is(err, ErrProtocol) || errors.Is(err, ErrFrameTooLarge), "%s: %v", b.name, err)
		}
		_, rerr := c.Read(make([]byte, 1))
		require.Error(t, rerr, "%s: the server closed the session", b.name)
	}
	wg.Wait()
	require.NoError(t, pushErr)
	requireSame(t, src, filepath.Join(root, "good"))
	_, err := os.Stat(filepath.Join(root, "bad2.tcpsync"))
	require.NoError(t, err, "the failed target is marked incomplete")
}

// TestSilentClientDropped: a client that connects and sends nothing (or
// floods before authenticating) is dropped after the handshake deadline.
func TestSilentClientDropped(t *testing.T) {
	addr, _ := startServer(t, t.TempDir(), func(s *Server) { s.HandshakeTimeout = 300 * time.Millisecond })
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	// io.ReadAll returns nil only at EOF: the server's close, not our
	// 10 s read deadline (which would return os.ErrDeadlineExceeded).
	_, err = io.ReadAll(c)
	require.NoError(t, err, "server closed the connection (EOF), not our deadline")

	// Pre-auth flood: a HELLO longer than the budget ends the connection.
	c2, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c2.Close()
	h := make([]byte, 8)
	h[0] = byte(wire.Hello)
	binary.LittleEndian.PutUint32(h[4:], 60000)
	_, err = c2.Write(h)
	require.NoError(t, err)
	require.NoError(t, c2.SetReadDeadline(time.Now().Add(10*time.Second)))
	b, _ := io.ReadAll(c2)
	require.GreaterOrEqual(t, len(b), 8)
	require.Equal(t, byte(wire.Error), b[0])
}

func TestConnectionCaps(t *testing.T) {
	addr, _ := startServer(t, t.TempDir(), func(s *Server) { s.MaxPreAuthPerHost = 2; s.HandshakeTimeout = 5 * time.Second })
	// Two silent connections, each past its HELLO exchange: the server has
	// counted both (no sleep needed to be sure of it).
	for range 2 {
		helloOnly(t, addr)
	}
	src := writeLayout(t, t.TempDir(), "src", layout.Layout{Size: 4096, Data: layout.Ranges(0, 4096)})
	_, err := PushFile(t.Context(), addr, src, "x", clientOpts())
	require.ErrorIs(t, err, ErrBusy)
}

func TestConcurrentPushes(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, nil)
	const n = 64
	var wg sync.WaitGroup
	errs := make([]error, n)
	srcs := make([]string, n)
	for i := range n {
		srcs[i] = filepath.Join(local, "src"+string(rune('A'+i/26))+string(rune('a'+i%26)))
		require.NoError(t, writeImage(srcs[i], 4<<20, 0.25, 3, uint64(i)))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for i := range n {
		wg.Go(func() {
			// Half of them exceed MaxSessionsPerHost (32) and are told
			// busy: they retry until a slot frees, bounded by ctx, not
			// by a count of 50 ms backoffs (0.4 s in all, which a loaded
			// machine's first 32 pushes can outlast).
			o := clientOpts()
			o.MaxAttempts, o.MaxBackoff = 10001, 200*time.Millisecond
			_, errs[i] = PushFile(ctx, addr, srcs[i], filepath.Base(srcs[i]), o)
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], srcs[i])
		requireSame(t, srcs[i], filepath.Join(root, filepath.Base(srcs[i])))
	}
}

// TestSymlinksBesideTheTarget: a pulled-to local file, and a pushed-to
// remote one, whose own name or sidecar name is a symlink to another file
// in the same directory is refused without touching that file (os.Root
// alone would follow a symlink that stays inside it).
func TestSymlinksBesideTheTarget(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, nil)
	l := layout.Layout{Size: 50_000, Data: layout.Ranges(0, 9000, 30_000, 5000)}
	layout.Create(t, filepath.Join(root, "remote"), l)
	layout.Create(t, filepath.Join(local, "src"), l)
	for _, dir := range []string{root, local} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "keep"), []byte("keep me"), 0o600))
		require.NoError(t, os.Symlink("keep", filepath.Join(dir, "link")))
		require.NoError(t, os.Symlink("keep", filepath.Join(dir, "img"+sidecarSuffix+".new")))
	}
	for _, atomic := range []bool{false, true} {
		o := clientOpts()
		o.Atomic = atomic
		_, err := Pull(t.Context(), addr, "remote", filepath.Join(local, "link"), o)
		require.ErrorIs(t, err, ErrPathOutsideRoot, "pull onto a symlink, atomic=%v", atomic)
		// The sidecar's temporary file gets a fresh random name (O_EXCL):
		// the symlink at the old fixed name is never opened, nor removed.
		_, err = Pull(t.Context(), addr, "remote", filepath.Join(local, "img"), o)
		require.NoError(t, err, "pull beside a symlink at the old sidecar temp name, atomic=%v", atomic)
		_, err = PushFile(t.Context(), addr, filepath.Join(local, "src"), "img", o)
		require.NoError(t, err, "push beside a symlink at the old sidecar temp name, atomic=%v", atomic)
		for _, dir := range []string{root, local} {
			got, err := os.ReadFile(filepath.Join(dir, "keep"))
			require.NoError(t, err)
			require.Equal(t, "keep me", string(got), "atomic=%v", atomic)
			fi, err := os.Lstat(filepath.Join(dir, "img"+sidecarSuffix+".new"))
			require.NoError(t, err)
			require.NotZero(t, fi.Mode()&os.ModeSymlink)
		}
	}
}
