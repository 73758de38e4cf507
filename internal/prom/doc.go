// Package prom exposes metrics in the Prometheus text format (version
// 0.0.4): counters, gauges and histograms, with or without labels, on a
// registry of the caller's own (no global state), and the standard process
// and Go runtime families (process_*, go_*) under the names the Prometheus
// Go client gives them.
//
// It is the command's metrics layer (serve --metrics, disks --metrics)
// instead of github.com/prometheus/client_golang, whose package
// initialisation (its default registry, collectors, protobuf descriptors,
// procfs regular expressions) ran in every sparsesync process, a copy of
// one extent included, whether it served metrics or not. Nothing here runs
// before a registry is made.
//
//	reg := prom.NewRegistry()
//	reg.MustRegister(prom.NewProcessCollector(), prom.NewGoCollector())
//	syncs := prom.NewCounterVec(prom.Opts{Name: "x_total", Help: "..."}, []string{"op"})
//	reg.MustRegister(syncs)
//	syncs.WithLabelValues("push").Inc()
//	http.Handle("/metrics", prom.Handler(reg))
//
// Every type is safe for concurrent use.
package prom
