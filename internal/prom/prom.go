package prom

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Opts name and describe a metric.
type Opts struct {
	Name string
	Help string
}

// HistogramOpts are Opts and the histogram's bucket upper bounds
// (ascending; +Inf is implied).
type HistogramOpts struct {
	Name    string
	Help    string
	Buckets []float64
}

// Collector is one metric family, or several (the standard collectors):
// only this package's types implement it.
type Collector interface {
	// families appends the collector's families, as they are now.
	families(out []family) []family
}

// Registry holds collectors and writes them in the text format. It is safe
// for concurrent use.
type Registry struct {
	mu sync.Mutex
	cs []Collector
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// MustRegister adds collectors. A family name registered twice is a
// programming error, found by the first scrape's check in the tests
// (WriteText refuses it).
func (r *Registry) MustRegister(cs ...Collector) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cs = append(r.cs, cs...)
}

// WriteText writes every family in the Prometheus text exposition format
// (version 0.0.4), families sorted by name and each family's series by
// their label values.
func (r *Registry) WriteText(w io.Writer) error {
	r.mu.Lock()
	cs := slices.Clone(r.cs)
	r.mu.Unlock()
	var fams []family
	for _, c := range cs {
		fams = c.families(fams)
	}
	slices.SortFunc(fams, func(a, b family) int { return strings.Compare(a.name, b.name) })
	bw := bufio.NewWriter(w)
	for i, f := range fams {
		if i > 0 && fams[i-1].name == f.name {
			return fmt.Errorf("prom: metric %s registered twice", f.name)
		}
		f.write(bw)
	}
	return bw.Flush()
}

// Handler serves the registry in the text format (for GET and HEAD).
func Handler(r *Registry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var buf bytes.Buffer
		if err := r.WriteText(&buf); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
		if req.Method == http.MethodGet {
			_, _ = w.Write(buf.Bytes())
		}
	})
}

// family is one metric family as exposed: its series, each with its label
// values (in the order of labels) and samples.
type family struct {
	name, help, typ string
	labels          []string
	series          []series
}

type series struct {
	values []string
	// samples are the lines of the series: suffix (_bucket, _sum,
	// _count, or ""), an extra label (le, quantile) and the value.
	samples []sample
}

type sample struct {
	suffix, extraName, extraValue string
	v                             float64
}

func (f family) write(w *bufio.Writer) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", f.name, escapeHelp(f.help), f.name, f.typ)
	slices.SortFunc(f.series, func(a, b series) int { return slices.Compare(a.values, b.values) })
	for _, s := range f.series {
		for _, x := range s.samples {
			w.WriteString(f.name + x.suffix)
			n := len(f.labels)
			if x.extraName != "" {
				n++
			}
			if n > 0 {
				w.WriteByte('{')
				for i, l := range f.labels {
					if i > 0 {
						w.WriteByte(',')
					}
					w.WriteString(l + `="` + escapeLabel(s.values[i]) + `"`)
				}
				if x.extraName != "" {
					if len(f.labels) > 0 {
						w.WriteByte(',')
					}
					w.WriteString(x.extraName + `="` + x.extraValue + `"`)
				}
				w.WriteByte('}')
			}
			w.WriteString(" " + formatFloat(x.v) + "\n")
		}
	}
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }

// value is a float64 updated atomically.
type value struct{ bits atomic.Uint64 }

func (v *value) add(d float64) {
	for {
		old := v.bits.Load()
		if v.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

func (v *value) set(x float64) { v.bits.Store(math.Float64bits(x)) }
func (v *value) get() float64  { return math.Float64frombits(v.bits.Load()) }

// Counter only goes up. Safe for concurrent use.
type Counter struct {
	opts Opts
	v    value
}

// NewCounter makes a counter (register it to expose it).
func NewCounter(o Opts) *Counter { return &Counter{opts: o} }

// Add adds d (which must not be negative).
func (c *Counter) Add(d float64) { c.v.add(d) }

// Inc adds 1.
func (c *Counter) Inc() { c.v.add(1) }

func (c *Counter) families(out []family) []family {
	return append(out, family{name: c.opts.Name, help: c.opts.Help, typ: "counter",
		series: []series{{samples: []sample{{v: c.v.get()}}}}})
}

// Gauge goes up and down. Safe for concurrent use.
type Gauge struct{ v value }

// Set sets the gauge.
func (g *Gauge) Set(x float64) { g.v.set(x) }

// GaugeFunc is a gauge read from fn at every scrape.
type GaugeFunc struct {
	opts Opts
	fn   func() float64
}

// NewGaugeFunc makes a gauge whose value is fn's at each scrape.
func NewGaugeFunc(o Opts, fn func() float64) *GaugeFunc { return &GaugeFunc{opts: o, fn: fn} }

func (g *GaugeFunc) families(out []family) []family {
	return append(out, family{name: g.opts.Name, help: g.opts.Help, typ: "gauge",
		series: []series{{samples: []sample{{v: g.fn()}}}}})
}

// Histogram counts observations in buckets. Safe for concurrent use.
type Histogram struct {
	bounds []float64
	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	count  uint64
}

func newHistogram(bounds []float64) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

// Observe records one value.
func (h *Histogram) Observe(x float64) {
	i, _ := slices.BinarySearch(h.bounds, x) // le: x <= bound
	h.mu.Lock()
	h.counts[i]++
	h.sum += x
	h.count++
	h.mu.Unlock()
}

func (h *Histogram) samples() []sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]sample, 0, len(h.bounds)+3)
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		out = append(out, sample{suffix: "_bucket", extraName: "le", extraValue: formatFloat(b), v: float64(cum)})
	}
	out = append(out, sample{suffix: "_bucket", extraName: "le", extraValue: "+Inf", v: float64(h.count)},
		sample{suffix: "_sum", v: h.sum}, sample{suffix: "_count", v: float64(h.count)})
	return out
}

// SingleHistogram is a histogram without labels.
type SingleHistogram struct {
	opts HistogramOpts
	*Histogram
}

// NewHistogram makes a histogram without labels.
func NewHistogram(o HistogramOpts) *SingleHistogram {
	return &SingleHistogram{opts: o, Histogram: newHistogram(o.Buckets)}
}

func (h *SingleHistogram) families(out []family) []family {
	return append(out, family{name: h.opts.Name, help: h.opts.Help, typ: "histogram",
		series: []series{{samples: h.samples()}}})
}

// ExponentialBuckets returns count bounds: start, start*factor, ...
func ExponentialBuckets(start, factor float64, count int) []float64 {
	b := make([]float64, count)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

// vec is a family of series of one kind, by label values.
type vec[T any] struct {
	name, help, typ string
	labels          []string
	mu              sync.Mutex
	series          map[string]*labelled[T]
	make            func() *T
	samples         func(*T) []sample
}

type labelled[T any] struct {
	values []string
	m      *T
}

// with returns the series of values, making it at first use.
func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("prom: %s takes %d label values, got %d", v.name, len(v.labels), len(values)))
	}
	key := strings.Join(values, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.series[key]
	if !ok {
		s = &labelled[T]{values: slices.Clone(values), m: v.make()}
		v.series[key] = s
	}
	return s.m
}

func (v *vec[T]) families(out []family) []family {
	v.mu.Lock()
	f := family{name: v.name, help: v.help, typ: v.typ, labels: v.labels}
	for _, s := range v.series {
		f.series = append(f.series, series{values: s.values, samples: v.samples(s.m)})
	}
	v.mu.Unlock()
	return append(out, f)
}

// CounterVec is counters by label values.
type CounterVec struct{ v *vec[Counter] }

// NewCounterVec makes counters with the given label names.
func NewCounterVec(o Opts, labels []string) *CounterVec {
	return &CounterVec{&vec[Counter]{name: o.Name, help: o.Help, typ: "counter", labels: labels,
		series: map[string]*labelled[Counter]{}, make: func() *Counter { return &Counter{} },
		samples: func(c *Counter) []sample { return []sample{{v: c.v.get()}} }}}
}

// WithLabelValues returns the counter of these label values (created at 0,
// and exposed from then on).
func (c *CounterVec) WithLabelValues(values ...string) *Counter { return c.v.with(values) }

func (c *CounterVec) families(out []family) []family { return c.v.families(out) }

// GaugeVec is gauges by label values.
type GaugeVec struct{ v *vec[Gauge] }

// NewGaugeVec makes gauges with the given label names.
func NewGaugeVec(o Opts, labels []string) *GaugeVec {
	return &GaugeVec{&vec[Gauge]{name: o.Name, help: o.Help, typ: "gauge", labels: labels,
		series: map[string]*labelled[Gauge]{}, make: func() *Gauge { return &Gauge{} },
		samples: func(g *Gauge) []sample { return []sample{{v: g.v.get()}} }}}
}

// WithLabelValues returns the gauge of these label values.
func (g *GaugeVec) WithLabelValues(values ...string) *Gauge { return g.v.with(values) }

func (g *GaugeVec) families(out []family) []family { return g.v.families(out) }

// HistogramVec is histograms by label values.
type HistogramVec struct{ v *vec[Histogram] }

// NewHistogramVec makes histograms with the given label names.
func NewHistogramVec(o HistogramOpts, labels []string) *HistogramVec {
	return &HistogramVec{&vec[Histogram]{name: o.Name, help: o.Help, typ: "histogram", labels: labels,
		series: map[string]*labelled[Histogram]{}, make: func() *Histogram { return newHistogram(o.Buckets) },
		samples: (*Histogram).samples}}
}

// WithLabelValues returns the histogram of these label values.
func (h *HistogramVec) WithLabelValues(values ...string) *Histogram { return h.v.with(values) }

func (h *HistogramVec) families(out []family) []family { return h.v.families(out) }

// Compile-time checks.
var (
	_ Collector = (*Counter)(nil)
	_ Collector = (*GaugeFunc)(nil)
	_ Collector = (*SingleHistogram)(nil)
	_ Collector = (*CounterVec)(nil)
	_ Collector = (*GaugeVec)(nil)
	_ Collector = (*HistogramVec)(nil)
)
