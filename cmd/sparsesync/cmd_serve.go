package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sparsesync/sparsesync/tcpsync"
)

type serveOptions struct {
	root      string
	listen    string
	tokenFile string
	noAuth    bool
	tlsCert   string
	tlsKey    string
	metrics   string
	pprof     bool
	verbose   bool
	qos       qosFlags
	rateFile  string
	// maxSessions and maxSessionsPerHost cap the sessions running at once.
	maxSessions, maxSessionsPerHost int
	// ready, if set, is called with the listening addresses (tests).
	ready func(addr, metricsAddr string)
}

func newServeCommand(g *globalOpts) *cobra.Command {
	opts := serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve --root DIR --listen ADDR --token-file F",
		Short: "Receive pushes into, and serve pulls from, files beneath a directory",
		Long: `Serve sparse files beneath --root to sparsesync push and pull clients.

Clients prove they hold the shared token (and the server proves it too);
--no-auth exists only for loopback listeners. Remote names are resolved
beneath --root: no "..", no absolute paths, no symlinks, regular files
only. A push creates the missing directories of its target beneath
--root (like rsync --mkpath).

--tls-cert/--tls-key add TLS 1.3; serve prints the certificate's pin, the
SHA-256 of its DER encoding in hex, for clients' --tls-pin (the same as
"openssl x509 -in CERT -outform DER | sha256sum").

--bwlimit RATE is a budget for the whole node, shared by all sessions:
what they read from storage, what they write and what they send and
receive, each bounded by RATE on its own, in equal pieces, so that
concurrent sessions get a fair share (each is also held to its client's
own --bwlimit). --bwlimit-file FILE reads the RATE from FILE instead (one
line, as --bwlimit takes it), at start and again on every SIGHUP.

--max-sessions N caps the syncs the server runs at once (64), and
--max-sessions-per-host N those of one client address (32): a node's
concurrent rebuilds, as Longhorn's concurrent-replica-rebuild-per-node-limit.
A sync beyond the cap is refused before it touches a file ("server busy:
too many sessions"), a transient refusal its client retries with backoff
(push and pull --retries) and then reports. serve lowers the caps to fit
its descriptor limit (ulimit -n) where that is low.

--metrics ADDR serves Prometheus metrics on http://ADDR/metrics
(sparsesync_syncs_total, sparsesync_bytes_total,
sparsesync_sync_duration_seconds, sparsesync_bwlimit_bytes_per_second,
sparsesync_throttled_seconds_total, and the standard process_* and go_*
metrics); --pprof adds Go profiles on /debug/pprof/ there, for whoever can
reach ADDR: keep it on loopback.

Every pushed file and every file pulled to a client keeps a small sidecar
NAME.tcpsync next to it: the record of the source version it holds, so the
next sync of an unchanged source ends after a quick check, and of the
checkpoint an interrupted sync resumes from. Removing it is harmless (the
next sync compares every block).

serve logs one line per session on stderr (msg="session done" or
"session failed", with the peer's address, the operation, the file, the
bytes copied and unchanged, and the error), and one line per failed
authentication in a fixed format for fail2ban and the like:
  level=WARN msg="authentication failed" remote=ADDR:PORT
-v adds debug records.

SIGHUP reloads the token file (and the TLS certificate and key): new
connections use them, sessions already running go on; a file that cannot
be read or is not a valid token is reported and the old one kept. It
re-reads --bwlimit-file too, and the new limit applies to the sessions
already running within a tenth of a second; a file that cannot be read or
holds no valid RATE is reported and the old limit kept.
SIGINT or SIGTERM stops accepting, lets running syncs checkpoint (a later
push resumes) and exits with status 130.
` + exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, f := range []struct {
				name string
				v    int
			}{{"max-sessions", opts.maxSessions}, {"max-sessions-per-host", opts.maxSessionsPerHost}} {
				if f.v < 1 {
					return usageError{fmt.Errorf("serve: --%s %d: want at least 1", f.name, f.v)}
				}
			}
			return runServe(cmd.Context(), g, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.root, "root", "", "directory the served files live beneath")
	f.StringVar(&opts.listen, "listen", "127.0.0.1:7373", "address to listen on")
	f.StringVar(&opts.tokenFile, "token-file", "", "file holding the shared token (mode 0600, at least 32 random bytes)")
	f.BoolVar(&opts.noAuth, "no-auth", false, "accept clients without a token (loopback listeners only)")
	f.StringVar(&opts.tlsCert, "tls-cert", "", "TLS certificate (PEM); with --tls-key enables TLS 1.3")
	f.StringVar(&opts.tlsKey, "tls-key", "", "TLS private key (PEM)")
	f.StringVar(&opts.metrics, "metrics", "", "serve Prometheus metrics on http://ADDR/metrics")
	f.BoolVar(&opts.pprof, "pprof", false, "with --metrics, also serve Go profiles on /debug/pprof/ (keep ADDR private)")
	f.BoolVarP(&opts.verbose, "verbose", "v", false, "also log debug records on stderr (every session is logged without it)")
	opts.qos.register(f)
	f.IntVar(&opts.maxSessions, "max-sessions", 64, "syncs that may run at once; more are refused as busy and their clients retry")
	f.IntVar(&opts.maxSessionsPerHost, "max-sessions-per-host", 32, "syncs that one client address may run at once")
	f.StringVar(&opts.rateFile, "bwlimit-file", "", "read the node-wide --bwlimit RATE from this file, again on SIGHUP")
	_ = cmd.MarkFlagRequired("root")
	return cmd
}

func runServe(ctx context.Context, g *globalOpts, opts serveOptions) error {
	srv := &tcpsync.Server{Root: opts.root, NoAuth: opts.noAuth}
	switch {
	case opts.noAuth && opts.tokenFile != "":
		return usageError{errors.New("serve: --no-auth and --token-file are exclusive")}
	case !opts.noAuth && opts.tokenFile == "":
		return usageError{errors.New("serve: --token-file is required (or --no-auth on a loopback address)")}
	case (opts.tlsCert == "") != (opts.tlsKey == ""):
		return usageError{errors.New("serve: --tls-cert and --tls-key go together")}
	case opts.pprof && opts.metrics == "":
		return usageError{errors.New("serve: --pprof needs --metrics ADDR")}
	case opts.maxSessions < 0:
		return usageError{fmt.Errorf("serve: --max-sessions %d: want at least 1", opts.maxSessions)}
	case opts.maxSessionsPerHost < 0:
		return usageError{fmt.Errorf("serve: --max-sessions-per-host %d: want at least 1", opts.maxSessionsPerHost)}
	}
	// 0 (only from the library's callers: the flags refuse it) means
	// tcpsync's defaults.
	srv.MaxSessions, srv.MaxSessionsPerHost = opts.maxSessions, opts.maxSessionsPerHost
	if err := checkAddr("serve: --listen", opts.listen); err != nil {
		return err
	}
	if opts.metrics != "" {
		if err := checkAddr("serve: --metrics", opts.metrics); err != nil {
			return err
		}
	}
	if opts.tokenFile != "" {
		tok, err := tcpsync.LoadToken(opts.tokenFile)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		srv.Token = tok
	}
	if err := checkRoot(opts.root); err != nil {
		return err
	}
	budget, err := opts.qos.nodeBudget(opts.rateFile)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	srv.Budget = budget
	var pin string
	var certs *certReloader
	if opts.tlsCert != "" {
		var err error
		if certs, err = loadCert(opts.tlsCert, opts.tlsKey); err != nil {
			return err
		}
		pin = certs.pin()
		srv.TLSConfig = &tls.Config{GetCertificate: certs.get, MinVersion: tls.VersionTLS13}
	}
	level := slog.LevelInfo // a line per session
	if opts.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level}))
	srv.Logger = logger
	reg := newRegistry()
	m := newServeMetrics(reg, budget.Wire.Rate)
	srv.OnSession = func(ev tcpsync.SessionEvent) {
		m.record(ev)
		if ev.Op == "" && errors.Is(ev.Err, tcpsync.ErrUnauthorized) {
			// One fixed format, for fail2ban: the address and nothing
			// the client chose.
			logger.Warn("authentication failed", "remote", ev.Remote)
		}
	}
	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); opts.noAuth && (!ok || !a.IP.IsLoopback()) {
		ln.Close()
		return usageError{fmt.Errorf("serve: --no-auth is only allowed on a loopback address, not %s", opts.listen)}
	}
	var metricsAddr string
	if opts.metrics != "" {
		hs, maddr, err := listenMetrics(opts.metrics, reg, opts.pprof)
		if err != nil {
			ln.Close()
			return fmt.Errorf("serve: --metrics: %w", err)
		}
		defer hs.Close()
		metricsAddr = maddr.String()
		if a, ok := maddr.(*net.TCPAddr); opts.pprof && (!ok || !a.IP.IsLoopback()) {
			fmt.Fprintf(g.stderr, "sparsesync: warning: --pprof serves Go profiles (heap, goroutines, command line) to anyone who can reach %s; bind --metrics to a loopback or private address\n",
				shownAddr(opts.metrics, maddr))
		}
	}
	auth := "token authentication"
	if opts.noAuth {
		auth = "no authentication"
	}
	if pin != "" {
		auth += ", TLS 1.3"
	}
	fmt.Fprintf(g.stderr, "sparsesync: serving %s on %s (%s)\n", opts.root, shownAddr(opts.listen, ln.Addr()), auth)
	if pin != "" {
		fmt.Fprintf(g.stderr, "sparsesync: TLS certificate pin (SHA-256 of its DER): %s\n", pin)
	}
	if metricsAddr != "" {
		fmt.Fprintf(g.stderr, "sparsesync: metrics on http://%s/metrics\n", shownAddr(opts.metrics, mln(metricsAddr)))
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go reloadOnHUP(ctx, g, hup, srv, opts, certs)
	if opts.ready != nil {
		opts.ready(ln.Addr().String(), metricsAddr)
	}
	if err := srv.Serve(ctx, ln); err != nil {
		return err
	}
	return ctx.Err() // stopped by a signal: exit 130, as documented
}

// reloadOnHUP reloads the token file and the TLS certificate on each
// SIGHUP until ctx ends; what cannot be loaded is reported and the old
// one kept.
func reloadOnHUP(ctx context.Context, g *globalOpts, hup <-chan os.Signal, srv *tcpsync.Server, opts serveOptions, certs *certReloader) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		var done []string
		if opts.rateFile != "" {
			if what, err := reloadRate(srv.Budget, opts.rateFile); err != nil {
				g.stderrLine(fmt.Sprintf("sparsesync: serve: SIGHUP: %v", err))
			} else {
				done = append(done, what)
			}
		}
		if opts.tokenFile != "" {
			tok, err := tcpsync.LoadToken(opts.tokenFile)
			if err == nil {
				err = srv.SetToken(tok)
			}
			if err != nil {
				g.stderrLine(fmt.Sprintf("sparsesync: serve: SIGHUP: %v; keeping the previous token", err))
			} else {
				done = append(done, "the token file "+opts.tokenFile)
			}
		}
		if certs != nil {
			c, err := loadCert(opts.tlsCert, opts.tlsKey)
			if err != nil {
				g.stderrLine(fmt.Sprintf("sparsesync: %v; keeping the previous certificate", err))
			} else {
				certs.set(c)
				done = append(done, "the TLS certificate "+opts.tlsCert+" (pin "+c.pin()+")")
			}
		}
		if len(done) > 0 {
			g.stderrLine("sparsesync: serve: SIGHUP: reloaded " + strings.Join(done, " and "))
		}
	}
}

// certReloader is the TLS certificate serve presents, replaced on SIGHUP.
type certReloader struct {
	mu   sync.Mutex
	cert *tls.Certificate
}

func loadCert(certFile, keyFile string) (*certReloader, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("serve: %s: %w", certFile, err)
	}
	return &certReloader{cert: &cert}, nil
}

func (r *certReloader) set(o *certReloader) {
	o.mu.Lock()
	c := o.cert
	o.mu.Unlock()
	r.mu.Lock()
	r.cert = c
	r.mu.Unlock()
}

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert, nil
}

// pin is the SHA-256 of the certificate's DER encoding in hex.
func (r *certReloader) pin() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	sum := sha256.Sum256(r.cert.Certificate[0])
	return hex.EncodeToString(sum[:])
}

// checkRoot refuses a --root that is not a directory, before serving.
func checkRoot(root string) error {
	fi, err := os.Stat(root)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case err != nil:
		return fmt.Errorf("serve: --root %s: %w", root, err)
	case !fi.IsDir():
		return fmt.Errorf("serve: --root %s: not a directory", root)
	}
	return nil
}

// mln parses an address we listened on back into a net.Addr.
func mln(addr string) net.Addr {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil
	}
	return a
}

// shownAddr is the address as the user gave it, with the port actually
// bound: "0.0.0.0:7373" stays 0.0.0.0 (Go reports it as [::]), and an
// empty host is every address.
func shownAddr(given string, bound net.Addr) string {
	host, _, err := net.SplitHostPort(given)
	a, ok := bound.(*net.TCPAddr)
	if err != nil || !ok {
		return fmt.Sprint(bound)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return net.JoinHostPort(host, strconv.Itoa(a.Port))
}
