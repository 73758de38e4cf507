package tcpsync

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// testTLS returns a server TLS config with a fresh self-signed
// certificate and a client config pinned to it.
func testTLS(t testing.TB) (srv, cli *tls.Config) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	pin := sha256.Sum256(der)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, PinnedTLS(pin[:])
}

// retries records what OnRetry announced.
type retries struct {
	mu   sync.Mutex
	errs []error
}

func (r *retries) on(_, _ int, _ time.Duration, err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// TestHangupBeforeGreetingRetried is hole 1's client half: a proxy that
// cuts the connection within the client's first 49 bytes (the HELLO)
// failed a push even with 2 retries. Now such a hang-up is transient:
// retried with backoff, announced, bounded by MaxAttempts, and the "does it
// expect TLS?" hint is given only when every attempt ended so.
func TestHangupBeforeGreetingRetried(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, nil)
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 4<<20, 0.5, 4, 9))

	// The first two connections are cut after 20 bytes: then a push.
	p := newCutProxyN(t, addr, 20, 2)
	o := clientOpts()
	o.MaxAttempts = 3
	var r retries
	o.OnRetry = r.on
	st, err := PushFile(t.Context(), p.addr(), src, "img", o)
	require.NoError(t, err)
	require.Equal(t, 3, st.Attempts)
	require.Len(t, r.errs, 2, "each retry announced")
	for _, e := range r.errs {
		require.ErrorAs(t, e, new(*hangupError))
	}
	requireSame(t, src, filepath.Join(root, "img"))

	// Cut every time: MaxAttempts attempts, then the error with the hint.
	p = newCutProxyN(t, addr, 20, 1<<30)
	r = retries{}
	o.OnRetry = r.on
	_, err = PushFile(t.Context(), p.addr(), src, "img2", o)
	require.ErrorContains(t, err, "the server hung up before greeting (does it expect TLS?)")
	require.Len(t, r.errs, 2)
	require.Equal(t, int32(3), p.n.Load(), "bounded: MaxAttempts connections")
}

// TestHangupHintOnlyWhenAlwaysTheSame: attempts that failed in different
// ways (a busy refusal, then hang-ups) end with the last error and no
// "does it expect TLS?" hint.
func TestHangupHintOnlyWhenAlwaysTheSame(t *testing.T) {
	var n atomic.Int32
	o := clientOpts()
	o.MaxAttempts = 3
	o.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, s := net.Pipe()
		first := n.Add(1) == 1
		go func() {
			defer s.Close()
			_, _ = io.ReadFull(s, make([]byte, wire.HeaderLen+wire.HelloLen))
			if first {
				_, _ = s.Write(refusal())
			}
		}()
		return c, nil
	}
	_, err := Push(t.Context(), "server:1", &bytesSource{}, "x", o)
	require.ErrorAs(t, err, new(*hangupError))
	require.NotContains(t, err.Error(), "expect TLS")
	require.Equal(t, int32(3), n.Load())
}

// TestTLSRefusalRetried: a TLS server refuses over its caps with a bare
// close; the client retries it (it used to fail at once) and gets in once
// there is room.
func TestTLSRefusalRetried(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	srvTLS, cliTLS := testTLS(t)
	addr, _ := startServer(t, root, func(s *Server) {
		s.TLSConfig = srvTLS
		s.MaxPreAuthPerHost = 1
	})
	holder, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 1<<20, 0.5, 2, 4))
	o := clientOpts()
	o.TLSConfig, o.MaxAttempts = cliTLS, 21
	var once sync.Once
	var r retries
	o.OnRetry = func(a, m int, d time.Duration, err error) {
		r.on(a, m, d, err)
		once.Do(func() { holder.Close() }) // room after the first refusal
	}
	// The holder must be pending before the push: a handshake probe from
	// the same address is refused once it is.
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = c.Read(make([]byte, 1))
		return errors.Is(err, io.EOF)
	}, 20*time.Second, 10*time.Millisecond)
	st, err := PushFile(t.Context(), addr, src, "img", o)
	require.NoError(t, err)
	require.GreaterOrEqual(t, st.Attempts, 2)
	require.ErrorAs(t, r.errs[0], new(*tlsError), "the bare close, announced")
	requireSame(t, src, filepath.Join(root, "img"))
}

// TestPlaintextClientToldTLS: a plaintext client of a TLS server is told
// so in plaintext and fails at once (not retried as a hang-up).
func TestPlaintextClientToldTLS(t *testing.T) {
	srvTLS, _ := testTLS(t)
	addr, _ := startServer(t, t.TempDir(), func(s *Server) { s.TLSConfig = srvTLS })
	o := clientOpts()
	o.MaxAttempts = 4
	var r retries
	o.OnRetry = r.on
	_, err := Push(t.Context(), addr, &bytesSource{}, "x", o)
	require.ErrorIs(t, err, ErrProtocol)
	require.ErrorContains(t, err, "this server speaks TLS")
	require.Empty(t, r.errs)
}

// bytesSource is an empty Source (for tests that never reach the data).
type bytesSource struct{}

func (bytesSource) ReadAt([]byte, int64) (int, error) { return 0, io.EOF }
func (bytesSource) Size() int64                       { return 0 }
func (bytesSource) Extents(context.Context) (sparse.Map, error) {
	return sparse.NewMap(0)
}
