package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"sync"
	"time"

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
	verbose   bool
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
only. --tls-cert/--tls-key add TLS 1.3. --metrics ADDR serves Prometheus
metrics on /metrics and profiles on /debug/pprof/.

SIGINT or SIGTERM stops accepting, lets running syncs checkpoint (a later
push resumes) and exits.
` + exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
	f.StringVar(&opts.metrics, "metrics", "", "serve /metrics and /debug/pprof/ on this address")
	f.BoolVarP(&opts.verbose, "verbose", "v", false, "log every session on stderr")
	_ = cmd.MarkFlagRequired("root")
	return cmd
}

func runServe(ctx context.Context, g *globalOpts, opts serveOptions) error {
	srv := &tcpsync.Server{Root: opts.root, NoAuth: opts.noAuth}
	switch {
	case opts.noAuth && opts.tokenFile != "":
		return usageError{errors.New("--no-auth and --token-file are exclusive")}
	case !opts.noAuth && opts.tokenFile == "":
		return usageError{errors.New("--token-file is required (or --no-auth on a loopback address)")}
	case opts.tokenFile != "":
		tok, err := tcpsync.LoadToken(opts.tokenFile)
		if err != nil {
			return err
		}
		srv.Token = tok
	}
	if (opts.tlsCert == "") != (opts.tlsKey == "") {
		return usageError{errors.New("--tls-cert and --tls-key go together")}
	}
	if opts.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(opts.tlsCert, opts.tlsKey)
		if err != nil {
			return fmt.Errorf("%s: %w", opts.tlsCert, err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	}
	level := slog.LevelWarn
	if opts.verbose {
		level = slog.LevelInfo
	}
	srv.Logger = slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level}))
	m := newServeMetrics()
	srv.OnSession = m.record
	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		return err
	}
	var metricsAddr string
	if opts.metrics != "" {
		mln, err := net.Listen("tcp", opts.metrics)
		if err != nil {
			ln.Close()
			return err
		}
		metricsAddr = mln.Addr().String()
		hs := &http.Server{Handler: m.mux(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = hs.Serve(mln) }()
		defer hs.Close()
	}
	fmt.Fprintf(g.stderr, "sparsesync: serving %s on %s\n", opts.root, ln.Addr())
	if opts.ready != nil {
		opts.ready(ln.Addr().String(), metricsAddr)
	}
	return srv.Serve(ctx, ln)
}

// serveMetrics counts sessions for the Prometheus text format, by hand.
type serveMetrics struct {
	mu       sync.Mutex
	syncs    map[[2]string]int64 // {op, result}
	bytes    map[string]int64
	durSum   map[string]float64
	durCount map[string]int64
}

func newServeMetrics() *serveMetrics {
	return &serveMetrics{syncs: map[[2]string]int64{}, bytes: map[string]int64{}, durSum: map[string]float64{}, durCount: map[string]int64{}}
}

func (m *serveMetrics) record(ev tcpsync.SessionEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	op := ev.Op
	if op == "" {
		op = "none"
	}
	result := "ok"
	if ev.Err != nil {
		result = "error"
	}
	m.syncs[[2]string{op, result}]++
	m.bytes["copied"] += ev.Stats.CopiedBytes
	m.bytes["unchanged"] += ev.Stats.UnchangedBytes
	m.bytes["punched"] += ev.Stats.PunchedBytes
	m.bytes["wire_sent"] += ev.Stats.WireBytesSent
	m.bytes["wire_received"] += ev.Stats.WireBytesReceived
	m.durSum[op] += ev.Elapsed.Seconds()
	m.durCount[op]++
}

func (m *serveMetrics) write(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Fprintln(w, "# HELP sparsesync_syncs_total Sessions finished, by operation and result.")
	fmt.Fprintln(w, "# TYPE sparsesync_syncs_total counter")
	keys := make([][2]string, 0, len(m.syncs))
	for k := range m.syncs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	var errs int64
	for _, k := range keys {
		fmt.Fprintf(w, "sparsesync_syncs_total{op=%q,result=%q} %d\n", k[0], k[1], m.syncs[k])
		if k[1] == "error" {
			errs += m.syncs[k]
		}
	}
	fmt.Fprintln(w, "# HELP sparsesync_errors_total Sessions that failed.")
	fmt.Fprintln(w, "# TYPE sparsesync_errors_total counter")
	fmt.Fprintf(w, "sparsesync_errors_total %d\n", errs)
	fmt.Fprintln(w, "# HELP sparsesync_bytes_total Bytes by kind: copied, unchanged, punched, wire_sent, wire_received.")
	fmt.Fprintln(w, "# TYPE sparsesync_bytes_total counter")
	for _, k := range []string{"copied", "unchanged", "punched", "wire_sent", "wire_received"} {
		fmt.Fprintf(w, "sparsesync_bytes_total{kind=%q} %d\n", k, m.bytes[k])
	}
	fmt.Fprintln(w, "# HELP sparsesync_sync_duration_seconds Session wall time.")
	fmt.Fprintln(w, "# TYPE sparsesync_sync_duration_seconds summary")
	ops := make([]string, 0, len(m.durCount))
	for op := range m.durCount {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		fmt.Fprintf(w, "sparsesync_sync_duration_seconds_sum{op=%q} %g\n", op, m.durSum[op])
		fmt.Fprintf(w, "sparsesync_sync_duration_seconds_count{op=%q} %d\n", op, m.durCount[op])
	}
}

func (m *serveMetrics) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		m.write(w)
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
