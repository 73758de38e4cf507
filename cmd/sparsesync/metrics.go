package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sparsesync/sparsesync/tcpsync"
)

// newRegistry is the CLI's one Prometheus setup (serve, disks): a
// registry of its own (no global state) with the standard process and Go
// runtime collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	return reg
}

// listenMetrics listens on addr and serves reg on /metrics, and Go's
// profiles on /debug/pprof/ only when withPprof (they expose the command
// line and let anyone who reaches the port profile the process), until
// the caller closes the server.
func listenMetrics(addr string, reg *prometheus.Registry, withPprof bool) (*http.Server, net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return hs, ln.Addr(), nil
}

// serveMetrics are the Prometheus metrics of `sparsesync serve --metrics`.
// The "Metrics" table of docs/network.md lists them.
type serveMetrics struct {
	syncs    *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// throttled is sparsesync_throttled_seconds_total.
	throttled prometheus.Counter
}

// byteKinds are the label values of sparsesync_bytes_total.
var byteKinds = []string{"copied", "unchanged", "punched", "wire_sent", "wire_received"}

// newQoSMetrics registers the metrics of a node budget on reg (serve,
// disks): sparsesync_bwlimit_bytes_per_second, the limit now (rate), and
// sparsesync_throttled_seconds_total, which the caller adds to as syncs
// end.
func newQoSMetrics(reg *prometheus.Registry, rate func() int64) prometheus.Counter {
	throttled := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sparsesync_throttled_seconds_total",
		Help: "Time finished syncs spent waiting on the bandwidth limit (--bwlimit), summed over syncs.",
	})
	reg.MustRegister(throttled, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sparsesync_bwlimit_bytes_per_second",
		Help: "The node-wide bandwidth limit (--bwlimit) now, per direction: reads, writes, network; 0 is unlimited.",
	}, func() float64 { return float64(rate()) }))
	return throttled
}

// newServeMetrics registers serve's metrics on reg; rate is the node
// budget's limit.
func newServeMetrics(reg *prometheus.Registry, rate func() int64) *serveMetrics {
	m := &serveMetrics{
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sparsesync_syncs_total",
			Help: "Sessions finished, by operation (push, pull, none: ended before choosing) and result (ok, error).",
		}, []string{"op", "result"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sparsesync_bytes_total",
			Help: "Bytes of finished sessions by kind: copied, unchanged, punched (file bytes), wire_sent, wire_received (network bytes).",
		}, []string{"kind"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sparsesync_sync_duration_seconds",
			Help:    "Wall time of finished sessions, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10), // 10 ms to about 43 min
		}, []string{"op"}),
	}
	reg.MustRegister(m.syncs, m.bytes, m.duration)
	m.throttled = newQoSMetrics(reg, rate)
	for _, k := range byteKinds {
		m.bytes.WithLabelValues(k) // present (at 0) before the first session
	}
	return m
}

// record counts one finished session (tcpsync.Server.OnSession).
func (m *serveMetrics) record(ev tcpsync.SessionEvent) {
	op := ev.Op
	if op == "" {
		op = "none"
	}
	result := "ok"
	if ev.Err != nil {
		result = "error"
	}
	for i, n := range []int64{ev.Stats.CopiedBytes, ev.Stats.UnchangedBytes, ev.Stats.PunchedBytes,
		ev.Stats.WireBytesSent, ev.Stats.WireBytesReceived} {
		m.bytes.WithLabelValues(byteKinds[i]).Add(float64(max(n, 0)))
	}
	m.duration.WithLabelValues(op).Observe(ev.Elapsed.Seconds())
	m.throttled.Add(ev.Stats.Throttled.Seconds())
	// The session count goes last: a scrape that sees a session counted
	// sees its bytes and duration too (a scraper, or a test, that waits
	// on syncs_total then reads the rest is never a sample behind).
	m.syncs.WithLabelValues(op, result).Inc()
}
