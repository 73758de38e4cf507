package tcpsync

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// cutProxy forwards connections to target and, on the first connection
// (the first cuts, if set), cuts both directions once cutAt bytes (both
// ways together) passed. onCut, if set, runs when it cuts.
type cutProxy struct {
	ln     net.Listener
	target string
	cutAt  int64
	cuts   int32
	onCut  func()
	n      atomic.Int32
	wg     sync.WaitGroup
}

func newCutProxy(t *testing.T, target string, cutAt int64) *cutProxy {
	return newCutProxyN(t, target, cutAt, 0)
}

// newCutProxyN is newCutProxy cutting the first cuts connections (at least
// one). cuts is set before the proxy accepts: its goroutine reads it.
func newCutProxyN(t *testing.T, target string, cutAt int64, cuts int32) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target, cutAt: cutAt, cuts: cuts}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		first := p.n.Add(1) <= max(1, p.cuts)
		p.wg.Go(func() { p.forward(c, first) })
	}
}

func (p *cutProxy) forward(c net.Conn, cut bool) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	var total atomic.Int64
	var once sync.Once
	kill := func() {
		once.Do(func() {
			c.Close()
			s.Close()
			if cut && p.onCut != nil {
				p.onCut()
			}
		})
	}
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if cut {
					left := p.cutAt - total.Load()
					if int64(n) >= left {
						if left > 0 {
							_, _ = dst.Write(buf[:left])
						}
						kill()
						return
					}
					total.Add(int64(n))
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					kill()
					return
				}
			}
			if err != nil {
				kill()
				return
			}
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { pipe(s, c) })
	pipe(c, s)
	wg.Wait()
}

func readSidecar(t *testing.T, path string) sidecar {
	b, err := os.ReadFile(path + sidecarSuffix)
	require.NoError(t, err)
	var sc sidecar
	require.NoError(t, json.Unmarshal(b, &sc))
	return sc
}

// TestCutConnection cuts the connection at a random byte; the push retries
// (resuming) and ends identical. SPARSESYNC_SOAK=N runs N trials instead of 20.
func TestCutConnection(t *testing.T) {
	trials := 20
	if s := os.Getenv("SPARSESYNC_SOAK"); s != "" {
		trials, _ = strconv.Atoi(s)
	}
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, nil)
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 48<<20, 0.5, 6, 11))
	// Measure the wire bytes of a full push and of a delta push, then cut
	// inside those ranges: even trials push a fresh target, odd trials a
	// changed source onto the previous one.
	st, err := PushFile(t.Context(), addr, src, "measure", clientOpts())
	require.NoError(t, err)
	fullWire := st.WireBytesSent + st.WireBytesReceived
	mutate(t, src, 40, 999)
	st, err = PushFile(t.Context(), addr, src, "measure", clientOpts())
	require.NoError(t, err)
	deltaWire := st.WireBytesSent + st.WireBytesReceived
	r := rand.New(rand.NewPCG(42, 0))
	retried := 0
	for i := range trials {
		name := "img" + strconv.Itoa(i/2)
		cut := r.Int64N(fullWire)
		if i%2 == 1 {
			mutate(t, src, 40, uint64(i))
			cut = r.Int64N(deltaWire)
		}
		if i%5 == 4 {
			cut = r.Int64N(4096) // inside the handshake and the maps
		}
		p := newCutProxy(t, addr, cut)
		o := clientOpts()
		// A retry finds the target busy until the server has seen the
		// cut and its session has written its checkpoint and let go:
		// on a loaded machine that took longer than six quick attempts
		// (250 ms). Room for many more, at most 250 ms apart.
		o.MaxAttempts = 40
		o.MaxBackoff = 250 * time.Millisecond
		o.FullCompare = i%3 == 0
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		st, err := PushFile(ctx, p.addr(), src, name, o)
		cancel()
		require.NoError(t, err, "trial %d cut at %d", i, cut)
		require.True(t, st.Verified)
		requireSame(t, src, filepath.Join(root, name))
		require.Equal(t, stateComplete, readSidecar(t, filepath.Join(root, name)).State)
		t.Logf("trial %d: cut at %d, attempts %d, resumed from %d, copied %d", i, cut, st.Attempts, st.ResumedFrom, st.CopiedBytes)
		if st.Attempts > 1 {
			retried++
		}
	}
	require.GreaterOrEqual(t, retried, trials*3/4, "most trials were cut and retried")
}

// TestCutWithoutRetryMarksIncomplete: with no retries, a cut push fails with
// an error, the target is marked incomplete, and the next push resumes from
// the checkpoint the receiver made when the session broke.
func TestCutWithoutRetryMarksIncomplete(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	opt, ends := sessionEndsOpt()
	addr, _ := startServer(t, root, opt)
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 128<<20, 0.6, 2, 12))
	p := newCutProxy(t, addr, 50<<20)
	_, err := PushFile(t.Context(), p.addr(), src, "img", clientOpts())
	require.Error(t, err)
	// The server notices the cut asynchronously: wait for the session's
	// end (its last checkpoint is written and its lock released), not
	// for the sidecar, or the next push may find the target busy.
	require.Error(t, waitSession(t, ends).Err)
	sc := readSidecar(t, filepath.Join(root, "img"))
	require.Positive(t, sc.Done)
	require.Equal(t, stateIncomplete, sc.State)
	st, err := PushFile(t.Context(), addr, src, "img", clientOpts())
	require.NoError(t, err)
	require.Equal(t, sc.Done, st.ResumedFrom)
	require.Less(t, st.CopiedBytes+st.ZeroBytes, st.DataBytes)
	requireSame(t, src, filepath.Join(root, "img"))
}

// TestServerRestartResumes stops the server in the middle of a push (its
// receivers checkpoint), starts a new one on the same root, and pushes again.
func TestServerRestartResumes(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 128<<20, 0.6, 2, 13))

	srv := &Server{Root: root, Token: testToken}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	// Slow the stream down so the shutdown lands mid-sync: a proxy that stops
	// the server (instead of cutting) after 50 MiB.
	p := newCutProxy(t, ln.Addr().String(), 1<<62)
	var passed atomic.Int64
	o := clientOpts()
	o.Progress = new(Progress)
	go func() {
		for passed.Load() == 0 {
			if o.Progress.Done.Load() > 50<<20 {
				passed.Store(1)
				stop()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	_, err = PushFile(t.Context(), p.addr(), src, "img", o)
	require.Error(t, err)
	require.NoError(t, <-done)
	sc := readSidecar(t, filepath.Join(root, "img"))
	require.Equal(t, stateIncomplete, sc.State)
	require.Positive(t, sc.Done, "the receiver checkpointed on shutdown")

	addr2, _ := startServer(t, root, nil)
	st, err := PushFile(t.Context(), addr2, src, "img", clientOpts())
	require.NoError(t, err)
	require.Equal(t, sc.Done, st.ResumedFrom)
	requireSame(t, src, filepath.Join(root, "img"))
}
