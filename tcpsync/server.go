package tcpsync

import (
	"container/list"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	wtarget "github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/qos"
	"golang.org/x/sys/unix"
)

// Server receives pushes into, and serves pulls from, files beneath Root.
// Configure the fields, then call Serve; the fields must not change after.
// Serve may be called once per Server. A Server is safe for concurrent use.
type Server struct {
	// Root is the directory every remote name is resolved beneath.
	Root string
	// Token is the pre-shared key (LoadToken); at least MinTokenLen bytes.
	Token []byte
	// NoAuth disables authentication; Serve refuses it unless the listener
	// is on a loopback address.
	NoAuth bool
	// TLSConfig, if set, wraps every connection in TLS (1.3 minimum).
	TLSConfig *tls.Config
	// Logger receives one line per session; nil discards.
	Logger *slog.Logger
	// HandshakeTimeout bounds the time from accept to authentication (10 s).
	HandshakeTimeout time.Duration
	// IdleTimeout ends an authenticated session that sends nothing (2 min).
	IdleTimeout time.Duration
	// MaxConns caps connections in total (128), MaxConnsPerHost per peer
	// address (64). Until its OPEN is accepted a connection is pending:
	// MaxPreAuth in all (64; when full the oldest pending connection is
	// closed for a new one) and MaxPreAuthPerHost per address (16; more are
	// refused). Sessions: MaxSessions in all (64), MaxSessionsPerHost per
	// address (32). Serve lowers them to fit the process's descriptor
	// limit (RLIMIT_NOFILE) where it is low. See accept.go.
	MaxConns, MaxConnsPerHost, MaxPreAuthPerHost, MaxSessions int
	MaxPreAuth, MaxSessionsPerHost                            int
	// FailDelay is the pause before refusing a wrong token (1 s).
	FailDelay time.Duration
	// CheckpointBytes and CheckpointInterval set how often a receiving
	// session makes its progress durable for resuming: every
	// CheckpointBytes of data it writes or compares (256 MiB), wherever
	// in the file, or CheckpointInterval (5 s).
	CheckpointBytes    int64
	CheckpointInterval time.Duration
	// OnSession, if set, is called after every session (for metrics).
	OnSession func(SessionEvent)
	// MaxMemory is the server-wide memory budget of sessions (1 GiB),
	// MaxMemoryPerHost what the sessions of one peer address may hold of
	// it together (a quarter, and at least MaxSessionMemory), and MaxSessionMemory one session's (about
	// 150 MiB: its 12 MiB of buffers and a peer's map of the largest
	// allowed extent count, reserved as the map arrives). A session that
	// does not fit is refused as busy.
	MaxMemory, MaxMemoryPerHost, MaxSessionMemory int64
	// Budget is the node-wide bandwidth budget (package qos) shared by all
	// sessions: Read the source reads of pulls and the reads of existing
	// targets (comparison, read-back) of pushes, Write the target writes,
	// Wire the bytes sent and received. Sessions draw from it in equal
	// pieces, so concurrent sessions get a fair share; each is also held to
	// its client's own limit. Change its rates while serving with
	// qos.Limiter.SetRate (serve does on SIGHUP). The zero Budget is
	// unlimited.
	Budget qos.Budget

	// greetGrace is how long a pending connection may wait for its peer
	// before it may be evicted (greetGrace; tests shorten it).
	greetGrace time.Duration

	probes       chan struct{} // newcomers whose first bytes are awaited (speaks)
	root         *os.Root
	mem          memPool
	busy         []byte // the pre-encoded refusal
	stats        connStats
	mu           sync.Mutex
	conns        int
	perHost      map[string]int
	preAuth      map[string]int // pending connections per host
	pending      list.List      // of *tracked, oldest first
	sessions     int
	hostSessions map[string]int
	wg           sync.WaitGroup
	fetchHooks   *fetchHooks   // tests only: a misbehaving fetch source (fetch.go)
	manifests    manifestCache // fetch manifests by file version (fetch.go)
	// hooks, tests only: act on a pushed target (a slowed read-back).
	hooks *testHooks
	// faults, tests only: fails chosen writes of a pushed target and its
	// sidecar (internal/target's Faults).
	faults *wtarget.Faults
}

// SessionEvent describes a finished session.
type SessionEvent struct {
	Remote  string // peer address
	Op      string // "push", "pull" or "" when the session ended before OPEN
	Path    string // remote name (sanitized)
	Stats   Stats
	Err     error
	Elapsed time.Duration
}

const (
	opPush = 1
	opPull = 2

	openAtomic      = 1 << 0
	openFullCompare = 1 << 1
)

// positiveOr sets *p to the default d unless it is positive.
func positiveOr[T int | int64 | time.Duration](p *T, d T) {
	if *p <= 0 {
		*p = d
	}
}

func (s *Server) setDefaults() {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	positiveOr(&s.HandshakeTimeout, 10*time.Second)
	positiveOr(&s.IdleTimeout, 2*time.Minute)
	positiveOr(&s.MaxConns, 128)
	positiveOr(&s.MaxConnsPerHost, 64)
	positiveOr(&s.MaxPreAuthPerHost, 16)
	positiveOr(&s.MaxSessions, 64)
	positiveOr(&s.MaxPreAuth, 64)
	positiveOr(&s.MaxSessionsPerHost, 32)
	positiveOr(&s.greetGrace, greetGrace)
	positiveOr(&s.FailDelay, time.Second)
	positiveOr(&s.MaxMemory, defaultServerMemory)
	positiveOr(&s.MaxSessionMemory, defaultSessionMemory)
	if s.MaxMemoryPerHost <= 0 {
		// A quarter, and at least one session's worth.
		s.MaxMemoryPerHost = min(s.MaxMemory, max(s.MaxMemory/4, s.MaxSessionMemory))
	}
	s.mem.limit, s.mem.hostLimit = s.MaxMemory, s.MaxMemoryPerHost
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur < 1<<30 {
		s.fitDescriptors(int(rl.Cur))
	}
}

// Descriptors: what a session may hold open (its socket, the target and
// an atomic temporary, the sidecar and its replacement, the lock, the
// read-back's O_DIRECT descriptor, a directory on the path) and what the
// process needs besides sessions (the runtime, listeners, logs, metrics).
const (
	fdsPerSession = 8
	fdsReserved   = 16
)

// fitDescriptors lowers the connection caps so that pending connections
// and sessions with their files fit in limit descriptors: pending
// connections get at most a quarter, sessions the rest. Otherwise a flood
// of silent connections under a low limit (ulimit -n 64) takes every
// descriptor, and the sessions that get through fail to open their files
// with EMFILE. The defaults fit from a limit of about 800.
func (s *Server) fitDescriptors(limit int) {
	avail := limit - fdsReserved
	pre := min(s.MaxPreAuth, max(1, avail/4))
	sess := min(s.MaxSessions, max(1, (avail-pre)/fdsPerSession))
	if pre == s.MaxPreAuth && sess == s.MaxSessions {
		return
	}
	s.MaxPreAuth, s.MaxSessions = pre, sess
	s.MaxConns = min(s.MaxConns, pre+sess)
	s.MaxPreAuthPerHost = min(s.MaxPreAuthPerHost, pre)
	s.MaxSessionsPerHost = min(s.MaxSessionsPerHost, sess)
	s.MaxConnsPerHost = min(s.MaxConnsPerHost, s.MaxConns)
	s.Logger.Info("connection caps lowered to fit the descriptor limit", "limit", limit,
		"pending", pre, "sessions", sess)
}

// Serve accepts connections on ln until ctx ends, then stops accepting,
// cancels running sessions (receivers checkpoint their targets so a later
// push resumes) and waits for them. It returns nil after such a shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.setDefaults()
	if s.NoAuth {
		if a, ok := ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
			return fmt.Errorf("--no-auth is only allowed on a loopback listener, not %s", ln.Addr())
		}
	} else if len(s.Token) < MinTokenLen {
		return fmt.Errorf("%w: token of %d bytes, need at least %d", ErrTokenFile, len(s.Token), MinTokenLen)
	}
	root, err := os.OpenRoot(s.Root)
	if err != nil {
		return fmt.Errorf("root: %w", err)
	}
	defer root.Close()
	s.root = root
	s.perHost, s.preAuth, s.hostSessions = map[string]int{}, map[string]int{}, map[string]int{}
	s.busy = refusal()
	// Probes hold descriptors too: within what MaxConns leaves beyond
	// MaxPreAuth (fitDescriptors' budget).
	s.probes = make(chan struct{}, max(1, min(maxProbes, s.MaxConns-s.MaxPreAuth)))
	s.stats.last.Store(time.Now().UnixNano())
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer s.summary(true)
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				s.wg.Wait()
				return nil
			}
			if temporaryAccept(err) {
				s.acceptBackoff(ctx, err, &delay)
				continue
			}
			s.wg.Wait()
			return fmt.Errorf("accept: %w", err)
		}
		delay = 0
		_ = c.SetDeadline(time.Now().Add(s.HandshakeTimeout))
		w := &watchedConn{Conn: c}
		host := hostOf(c.RemoteAddr())
		tc, full := s.admit(w, host, false)
		if tc == nil && full && s.probe() {
			// No room: admitted only if its peer speaks (accept.go),
			// which is waited for off the accept loop.
			s.wg.Go(func() {
				spoke := speaks(c, speakWait)
				s.probeDone()
				var tc *tracked
				if spoke {
					tc, _ = s.admit(w, host, true)
				}
				if tc == nil {
					s.refuse(c)
					return
				}
				defer s.release(tc)
				s.serveConn(ctx, tc)
			})
			continue
		}
		if tc == nil {
			s.refuse(c)
			continue
		}
		s.wg.Go(func() {
			defer s.release(tc)
			s.serveConn(ctx, tc)
		})
	}
}

// linger lets the peer read our ERROR before the close: closing with its
// unread bytes in our buffer would reset the connection and lose the
// frame. It half-closes and drains for at most a second and 4 MiB, and
// not at all once the server is shutting down (a peer that keeps the
// connection open must not hold up the shutdown).
func linger(ctx context.Context, c net.Conn) {
	if hc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = hc.CloseWrite()
	}
	if ctx.Err() != nil {
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.CopyN(io.Discard, c, 4<<20)
}

func hostOf(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	return a.String()
}

func (s *Server) serveConn(ctx context.Context, tc *tracked) {
	c := tc.c
	start := time.Now()
	srvCtx := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	defer c.Close()
	ev := SessionEvent{Remote: c.RemoteAddr().String()}
	var f *framer
	ev.Stats, ev.Err = s.session(ctx, cancel, tc, &ev, &f)
	if f != nil {
		f.wd.stop()
		ev.Stats.WireBytesReceived = f.in.n.Load()
		ev.Stats.WireBytesSent = f.out.n.Load()
		ev.Stats.Throttled = f.m.throttled()
		if ev.Err != nil {
			switch {
			case f.wd.stalled():
				ev.Err = fmt.Errorf("%w: %w", ErrStalled, ev.Err)
			case ctx.Err() != nil:
				ev.Err = fmt.Errorf("%w: %w", ErrShutdown, ev.Err)
			}
			f.sendError(ev.Err)
			if tc.opened {
				// Out of every budget while it lingers (a second at most).
				s.release(tc)
				linger(srvCtx, c)
			}
		}
	}
	ev.Elapsed = time.Since(start)
	if !tc.opened {
		// Failures before a session (unauthenticated, or authenticated but
		// no OPEN in time) are counted, not logged one by one: a flood must
		// not become a log flood.
		s.stats.failed.Add(1)
		s.summary(false)
	} else if ev.Err != nil {
		s.Logger.Warn("session failed", "remote", ev.Remote, "op", ev.Op, "path", ev.Path, "err", sanitize(ev.Err.Error()))
	} else {
		s.Logger.Info("session done", "remote", ev.Remote, "op", ev.Op, "path", ev.Path,
			"copied", ev.Stats.CopiedBytes, "unchanged", ev.Stats.UnchangedBytes, "elapsed", ev.Elapsed)
	}
	if s.OnSession != nil {
		s.OnSession(ev)
	}
}

// errNeedsTLS answers a plaintext HELLO on a TLS port.
var errNeedsTLS = fmt.Errorf("%w: this server speaks TLS (give the client --tls-pin or --tls-ca)", ErrProtocol)

// prefixConn is a connection whose first bytes were already read.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(b, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// plaintextHello reads the first frame header's worth of bytes of a
// connection to a TLS server (a TLS ClientHello is longer). A tcpsync
// HELLO header is answered with a plaintext ERROR (errNeedsTLS); anything
// else is handed on, those bytes first.
func plaintextHello(ctx context.Context, c net.Conn) (net.Conn, error) {
	var h [wire.HeaderLen]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return nil, fmt.Errorf("TLS handshake: %w", unexpected(err))
	}
	if h != [wire.HeaderLen]byte{byte(wire.Hello), 0, 0, 0, wire.HelloLen} {
		return &prefixConn{Conn: c, pre: h[:]}, nil
	}
	msg := wireText(errNeedsTLS)
	b := binary.LittleEndian.AppendUint16(h[:0:0], errorCode(errNeedsTLS))
	b = append(b, msg...)
	frame := append([]byte{byte(wire.Error), 0, 0, 0}, binary.LittleEndian.AppendUint32(nil, uint32(len(b)))...)
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write(append(frame, b...))
	linger(ctx, c)
	return nil, errNeedsTLS
}
