package tcpsync

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
	"time"

	wtarget "github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/qos"
)

// Options configure a client call (Push, Pull). The zero value means: no
// token (which fails unless NoAuth), auto compression, 4 KiB blocks, 5
// retries with backoff from 1 s to 30 s.
type Options struct {
	// Token is the pre-shared key (LoadToken). Required unless NoAuth.
	Token []byte
	// NoAuth talks to a server started without authentication (loopback).
	NoAuth bool
	// TLSConfig, if set, speaks TLS 1.3 (see PinnedTLS for pinning).
	TLSConfig *tls.Config
	// Compress selects DATA compression (sending side).
	Compress Compression
	// Atomic writes a temporary file and renames it over the target at
	// the end (no resume).
	Atomic bool
	// FullCompare skips the quick check and any resume, and compares
	// every block.
	FullCompare bool
	// ReadBack selects the storage check (ReadBack): by default the
	// receiver reads the target back after the final fdatasync and checks
	// it whole for atomic syncs; ReadBackOn does it always (replica
	// rebuilds), ReadBackOff never.
	ReadBack ReadBack
	// BlockSize is the compare granularity: a power of two in 4 KiB-1 MiB.
	BlockSize int
	// MaxAttempts is how many attempts a transfer makes at most: 1 tries
	// once, 0 means the default, 6 (a first attempt and 5 retries).
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the pause between attempts (1 s, 30 s).
	MinBackoff, MaxBackoff time.Duration
	// IdleTimeout ends a connection on which nothing arrives (2 min).
	IdleTimeout time.Duration
	// Dial opens connections (tests insert proxies); default net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger receives retries and failures; nil discards.
	Logger *slog.Logger
	// OnRetry, if set, is called before each pause between attempts with
	// the number of the coming attempt, the most attempts there will be,
	// the pause and the error of the failed attempt (to announce it).
	OnRetry func(attempt, max int, delay time.Duration, err error)
	// Progress, if set, is updated while data moves.
	Progress *Progress
	// Budget bounds this side's bytes per second (package qos): Read the
	// source reads of a push and, on a pull, the reads of an existing
	// target for comparison and the read-back; Write the target writes of
	// a pull; Wire the bytes sent and received. It may be shared with other
	// syncs and changed while they run (qos.Limiter.SetRate). The zero
	// Budget is unlimited; the server applies its own (Server.Budget).
	Budget qos.Budget

	hooks  *testHooks      // tests only: acts on a pulled target
	faults *wtarget.Faults // tests only: fails chosen writes of a pulled target
}

func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.BlockSize == 0 {
		c.BlockSize = 4096
	}
	if !validBlockSize(uint32(c.BlockSize)) || c.BlockSize > wire.MaxBlock {
		return c, fmt.Errorf("block size %d is not a power of two in [%d, %d]", c.BlockSize, wire.MinBlock, wire.MaxBlock)
	}
	if c.MaxAttempts < 0 {
		return c, fmt.Errorf("max attempts %d is negative (1: no retry, 0: the default)", c.MaxAttempts)
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 6
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 2 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		c.Dial = d.DialContext
	}
	if !c.NoAuth && len(c.Token) < MinTokenLen {
		return c, fmt.Errorf("%w: token of %d bytes, need at least %d (or NoAuth)", ErrTokenFile, len(c.Token), MinTokenLen)
	}
	return c, nil
}

// PinnedTLS returns a client TLS config that accepts exactly the server
// certificate whose SHA-256 (of the DER) is pin, whatever its name or issuer.
func PinnedTLS(pin []byte) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // replaced by the pin check below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("server sent no certificate")
			}
			sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if subtle.ConstantTimeCompare(sum[:], pin) != 1 {
				return fmt.Errorf("server certificate %x does not match the pin", sum)
			}
			return nil
		},
	}
}

// CATLS returns a client TLS config verifying the server against the PEM
// CA certificates in caPEM and the host name serverName.
func CATLS(caPEM []byte, serverName string) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate in the PEM data")
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: serverName}, nil
}

// PushFile sends the local file path to remote (relative to the server's
// root) at addr.
func PushFile(ctx context.Context, addr, path, remote string, o *Options) (Stats, error) {
	if err := ValidateName(remote); err != nil {
		return Stats{}, err
	}
	// O_NONBLOCK: a FIFO (which NewFileSource refuses) must not block the
	// open waiting for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Stats{}, err
	}
	defer f.Close()
	src, err := NewFileSource(f)
	if err != nil {
		return Stats{}, err
	}
	return Push(ctx, addr, src, remote, o)
}

// Push sends src to remote at addr, retrying transport failures; the server
// resumes from its checkpoint. The remote target is verified before it is
// reported complete.
func Push(ctx context.Context, addr string, src Source, remote string, o *Options) (Stats, error) {
	if err := ValidateName(remote); err != nil {
		return Stats{}, err
	}
	return withRetries(ctx, addr, o, func(ctx context.Context, c *Options, f *framer, seed uint64) (Stats, error) {
		if err := f.send(wire.Open, 0, openBody(opPush, openFlags(c), uint32(c.BlockSize), remote)); err != nil {
			return Stats{}, err
		}
		if _, _, err := f.expect(wire.Opened); err != nil {
			return Stats{}, err
		}
		return sendSource(ctx, f, src, c.params(seed))
	})
}

// Pull fetches remote from the server at addr into the local file dst,
// creating it if needed. Resume state lives in dst + ".tcpsync".
func Pull(ctx context.Context, addr, remote, dst string, o *Options) (Stats, error) {
	if err := ValidateName(remote); err != nil {
		return Stats{}, err
	}
	return withRetries(ctx, addr, o, func(ctx context.Context, c *Options, f *framer, seed uint64) (Stats, error) {
		flags := openFlags(c) | uint32(c.Compress)<<8
		if err := f.send(wire.Open, 0, openBody(opPull, flags, uint32(c.BlockSize), remote)); err != nil {
			return Stats{}, err
		}
		if _, _, err := f.expect(wire.Opened); err != nil {
			return Stats{}, err
		}
		// Only now that the server serves the file: a refused pull must not
		// leave an empty destination behind.
		t, err := openLocalTarget(dst, c.Atomic, c.faults)
		if err != nil {
			return Stats{}, err
		}
		defer t.close()
		return receiveTarget(ctx, f, t, c.params(seed))
	})
}

func openFlags(c *Options) uint32 {
	var fl uint32
	if c.Atomic {
		fl |= openAtomic
	}
	if c.FullCompare {
		fl |= openFullCompare
	}
	if c.ReadBack.on(c.Atomic) {
		fl |= openReadBack
	}
	return fl
}

func (c *Options) params(seed uint64) syncParams {
	return syncParams{seed: seed, bs: int64(c.BlockSize), compress: c.Compress, fullCompare: c.FullCompare,
		logger: c.Logger, progress: c.Progress, readBack: c.ReadBack.on(c.Atomic), hooks: c.hooks}
}

type attemptFunc func(ctx context.Context, c *Options, f *framer, seed uint64) (Stats, error)

// withRetries dials, authenticates and runs fn, retrying retryable failures
// with exponential backoff and jitter; a verification failure is retried
// once with a full compare.
func withRetries(ctx context.Context, addr string, o *Options, fn attemptFunc) (Stats, error) {
	start := time.Now()
	c, err := o.withDefaults()
	if err != nil {
		return Stats{}, err
	}
	var total Stats
	verifyRetried, reached, allHangups := false, false, true
	for attempt := 0; ; attempt++ {
		st, heard, err := attemptOnce(ctx, addr, &c, fn)
		var he *hangupError
		isHangup := errors.As(err, &he)
		allHangups = allHangups && isHangup
		total.WireBytesSent += st.WireBytesSent
		total.WireBytesReceived += st.WireBytesReceived
		total.Throttled += st.Throttled
		if err == nil {
			st.WireBytesSent, st.WireBytesReceived = total.WireBytesSent, total.WireBytesReceived
			st.Throttled = total.Throttled
			st.Attempts = attempt + 1
			st.Elapsed = time.Since(start)
			return st, nil
		}
		if ctx.Err() != nil {
			return total, err
		}
		again := retryable(err, reached) && attempt+1 < c.MaxAttempts
		reached = reached || heard
		if errors.Is(err, ErrVerify) && !verifyRetried && !c.FullCompare {
			verifyRetried, again = true, true
			c.FullCompare = true
		}
		if !again {
			total.Attempts = attempt + 1
			if isHangup && allHangups {
				he.hint = true // the same every time: maybe not our protocol
			}
			return total, err
		}
		d := min(c.MaxBackoff, c.MinBackoff<<min(attempt, 16))
		d = d/2 + rand.N(d/2+1)
		c.Logger.Warn("sync attempt failed, retrying", "attempt", attempt+1, "backoff", d, "err", err)
		if c.OnRetry != nil {
			maxAttempts := c.MaxAttempts
			if verifyRetried && attempt+1 >= c.MaxAttempts {
				maxAttempts = attempt + 2
			}
			c.OnRetry(attempt+2, maxAttempts, d, err)
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return total, fmt.Errorf("%w (after: %w)", context.Cause(ctx), err)
		}
	}
}

// attemptOnce runs one attempt; heard reports whether the server sent
// anything (it is a sparsesync server and was up).
func attemptOnce(ctx context.Context, addr string, c *Options, fn attemptFunc) (_ Stats, heard bool, _ error) {
	conn, err := c.Dial(ctx, "tcp", addr)
	if err != nil {
		return Stats{}, false, &dialError{err}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if c.TLSConfig != nil {
		cfg := c.TLSConfig.Clone()
		if cfg.MinVersion < tls.VersionTLS13 {
			cfg.MinVersion = tls.VersionTLS13
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return Stats{}, false, &tlsError{err}
		}
		conn = tc
	}
	f := newFramer(conn)
	defer f.cutOnDone(ctx)()
	f.narrowMaps = c.hooks != nil && c.hooks.narrowMaps
	f.hmacOnly = c.hooks != nil && c.hooks.hmacOnly
	f.noBatch = c.hooks != nil && c.hooks.noBatch
	f.notBusy = c.hooks != nil && c.hooks.notBusy
	f.noWindows = c.hooks != nil && c.hooks.noWindows
	seed, err := clientHandshake(ctx, f, c.Token, c.NoAuth)
	if err == nil && c.hooks != nil && c.hooks.agreedMAC != nil {
		c.hooks.agreedMAC(f.gmac)
	}
	switch {
	case err == nil:
	case f.in.n.Load() > 0 && !f.heardFrame && (errors.Is(err, ErrProtocol) || errors.Is(err, ErrFrameTooLarge)):
		// The first bytes the server sent are no frame of ours.
		err = notSparsesync(addr, f.firstBytes())
	case f.in.n.Load() == 0 && ctx.Err() == nil && errors.Is(err, os.ErrDeadlineExceeded):
		// Silence: a wedged server, or another service that waits for
		// its own kind of request (HTTP does). Still retried.
		err = fmt.Errorf("no greeting from %s (is it a sparsesync server?): %w", addr, err)
	}
	var st Stats
	if err == nil {
		_ = f.cc.SetDeadline(time.Time{}) // not undoing a cut
		f.setIdle(c.IdleTimeout)
		f.watch(startWatchdog(c.IdleTimeout, cancel))
		f.mem = &sessionMem{limit: defaultSessionMemory}
		if c.hooks != nil && c.hooks.sessionMemory > 0 {
			f.mem.limit = c.hooks.sessionMemory
		}
		if err = f.limit(ctx, c.Budget); err == nil {
			st, err = fn(ctx, c, f, seed)
		}
		st.Throttled = f.m.throttled()
		f.wd.stop()
		if err != nil && f.wd.stalled() && ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", ErrStalled, err)
		}
	}
	st.WireBytesSent, st.WireBytesReceived = f.out.n.Load(), f.in.n.Load()
	if c.Progress != nil {
		c.Progress.Wire.Add(st.WireBytesSent + st.WireBytesReceived)
	}
	heard = st.WireBytesReceived > 0
	if err != nil && !heard && closed(err) && !errors.As(err, new(*tlsError)) && ctx.Err() == nil {
		err = &hangupError{err: err}
	}
	return st, heard, err
}
