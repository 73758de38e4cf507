package tcpsync

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// countHandler counts log records at WARN or above.
type countHandler struct{ n atomic.Int64 }

func (h *countHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *countHandler) Handle(context.Context, slog.Record) error    { h.n.Add(1); return nil }
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *countHandler) WithGroup(string) slog.Handler                { return h }

// dialFrom dials addr from the loopback address 127.0.0.<host>.
func dialFrom(ctx context.Context, host int, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(host))}}
	return d.DialContext(ctx, "tcp", addr)
}

// TestFloodKeepsServing is hole 8: from 8 loopback addresses, 400 silent
// connections and 200 that authenticate and then stall before OPEN (as in
// the report), plus 8 dialers re-dialing silent connections while a real
// 64 MiB push from another address runs. The push completes; the server's pending
// connections stay within their budget; the log gets summary lines, not
// one per refusal.
func TestFloodKeepsServing(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	logs := &countHandler{}
	addr, srv := startServer(t, root, func(s *Server) {
		s.Logger = slog.New(logs)
		s.HandshakeTimeout = 5 * time.Second
	})
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 64<<20, 0.5, 16, 3))

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var conns []net.Conn
	hold := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	// 400 silent connections.
	for i := range 400 {
		c, err := dialFrom(ctx, 2+i%8, addr)
		require.NoError(t, err)
		hold(c)
	}
	// 200 authenticated stallers (some are refused or evicted: fine).
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			c, err := dialFrom(ctx, 2+i%8, addr)
			if err != nil {
				return
			}
			hold(c)
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			_, _ = clientHandshake(ctx, newFramer(c), testToken, false)
		})
	}
	wg.Wait()
	// Re-dialers: 8 × 50 more silent connections during the push.
	floodDone := make(chan struct{})
	var fw sync.WaitGroup
	for h := range 8 {
		fw.Go(func() {
			for range 50 {
				select {
				case <-floodDone:
					return
				default:
				}
				c, err := dialFrom(ctx, 2+h, addr)
				if err != nil {
					continue
				}
				hold(c)
			}
		})
	}

	o := clientOpts()
	// Attempts spanning more than the greeting grace (the stallers spoke,
	// so they hold their places until they have waited it).
	o.MaxAttempts, o.MinBackoff, o.MaxBackoff = 9, 100*time.Millisecond, time.Second
	o.Dial = func(ctx context.Context, _, a string) (net.Conn, error) { return dialFrom(ctx, 1, a) }
	start := time.Now()
	st, err := PushFile(ctx, addr, src, "img", o)
	took := time.Since(start)
	close(floodDone)
	fw.Wait()
	require.NoError(t, err)
	t.Logf("push of 64 MiB during the flood: %v, %d attempt(s); %d connections held by the flood; %d WARN lines",
		took, st.Attempts, len(conns), logs.n.Load())
	requireSame(t, src, filepath.Join(root, "img"))
	pending := srv.pendingLen()
	// Silent connections stay within MaxPreAuth; peers that spoke (the
	// authenticated stallers) may take the rest of MaxConns.
	require.LessOrEqual(t, pending, srv.MaxConns)
	// At most one summary per 10 s, plus the push's own lines (none: it
	// succeeded).
	require.LessOrEqual(t, logs.n.Load(), int64(1+took/logInterval))
}

// failingListener returns errs from Accept before accepting for real.
type failingListener struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// TestAcceptErrorsRetried is hole 9: EMFILE, ENFILE and ECONNABORTED from
// accept are retried with backoff; the server keeps serving.
func TestAcceptErrorsRetried(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var errs []error
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED, syscall.EMFILE, syscall.EMFILE} {
		errs = append(errs, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", e)})
	}
	fl := &failingListener{Listener: ln, errs: errs}
	srv := &Server{Root: root, Token: testToken}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, fl) }()
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 4<<20, 0.5, 4, 9))
	_, err = PushFile(t.Context(), ln.Addr().String(), src, "img", clientOpts())
	require.NoError(t, err)
	requireSame(t, src, filepath.Join(root, "img"))
	cancel()
	require.NoError(t, <-done)
	require.Empty(t, fl.errs)
	_ = fmt.Sprint
}

// TestTLSRefusalNotPlaintext: a TLS server refusing a connection over its
// caps closes it without writing plaintext into a TLS port.
func TestTLSRefusalNotPlaintext(t *testing.T) {
	cfg, _ := testTLS(t)
	addr, _ := startServer(t, t.TempDir(), func(s *Server) {
		s.TLSConfig = cfg
		s.MaxPreAuthPerHost = 1
		s.HandshakeTimeout = 10 * time.Second
	})
	first, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer first.Close()
	// The second connection from the same address is over the cap.
	var got []byte
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		got, err = io.ReadAll(c)
		return err == nil // closed by the server (not our deadline)
	}, 20*time.Second, 10*time.Millisecond)
	require.Empty(t, got, "plaintext on a TLS port: %q", got)
}

// TestRefusalIsCheap is the other half of hole 8: a refused connection
// used to cost 512 KiB of buffers (a framer) to send one ERROR frame. Now
// a refusal writes the pre-encoded frame: 200 refusals allocate well under
// 16 KiB each in the whole process (dialing included), and the client
// reads the busy frame, 52 bytes.
func TestRefusalIsCheap(t *testing.T) {
	addr, _ := startServer(t, t.TempDir(), func(s *Server) {
		s.MaxPreAuthPerHost = 1
		s.HandshakeTimeout = time.Minute
	})
	first, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer first.Close()
	refused := func() []byte {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		b, err := io.ReadAll(c)
		require.NoError(t, err, "closed by the server, not by our deadline")
		return b
	}
	// The first connection is pending once a second one is refused.
	require.Eventually(t, func() bool { return len(refused()) > 0 }, 10*time.Second, time.Millisecond)
	const n = 200
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	var got []byte
	for range n {
		got = refused()
	}
	metrics.Read(s)
	per := (s[0].Value.Uint64() - before) / n
	t.Logf("%d bytes allocated per refused connection; the refusal: %d bytes", per, len(got))
	require.Less(t, per, uint64(16<<10))
	require.Len(t, got, 52)
	require.ErrorIs(t, decodeError(got[wire.HeaderLen:]), ErrBusy)
}
