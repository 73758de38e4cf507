package prom

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// parse reads r's text output with the Prometheus text parser.
func parse(t *testing.T, r *Registry) map[string]*dto.MetricFamily {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, r.WriteText(&buf))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(&buf)
	require.NoError(t, err, buf.String())
	return fams
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestTextFormat: what the registry writes is read back by Prometheus's own
// parser with every family's type, help, labels (escaped) and values, and
// histograms with cumulative buckets, their sum and count.
func TestTextFormat(t *testing.T) {
	r := NewRegistry()
	c := NewCounter(Opts{Name: "t_plain_total", Help: "A help with a \\ and a\nnew line."})
	cv := NewCounterVec(Opts{Name: "t_by_total", Help: "By label."}, []string{"op", "result"})
	gv := NewGaugeVec(Opts{Name: "t_gauge", Help: "Gauges."}, []string{"disk"})
	gf := NewGaugeFunc(Opts{Name: "t_func", Help: "Read at scrape."}, func() float64 { return 42.5 })
	h := NewHistogram(HistogramOpts{Name: "t_seconds", Help: "Durations.", Buckets: ExponentialBuckets(0.01, 4, 3)})
	hv := NewHistogramVec(HistogramOpts{Name: "t_op_seconds", Help: "By op.", Buckets: []float64{1, 2}}, []string{"op"})
	r.MustRegister(c, cv, gv, gf, h, hv)
	c.Add(2.5)
	c.Inc()
	cv.WithLabelValues("push", "ok").Inc()
	cv.WithLabelValues("pull", "error").Add(3)
	cv.WithLabelValues("none", "ok") // exposed at 0
	gv.WithLabelValues(`a "quoted" \ name` + "\n").Set(-7)
	for _, x := range []float64{0.005, 0.01, 0.02, 0.2, 5} {
		h.Observe(x)
	}
	hv.WithLabelValues("push").Observe(1)
	hv.WithLabelValues("push").Observe(3)

	fams := parse(t, r)
	require.Len(t, fams, 6)
	require.Equal(t, "A help with a \\ and a\nnew line.", fams["t_plain_total"].GetHelp())
	require.Equal(t, dto.MetricType_COUNTER, fams["t_plain_total"].GetType())
	require.Equal(t, 3.5, fams["t_plain_total"].GetMetric()[0].GetCounter().GetValue())

	by := map[string]float64{}
	for _, m := range fams["t_by_total"].GetMetric() {
		l := labelsOf(m)
		by[l["op"]+"/"+l["result"]] = m.GetCounter().GetValue()
	}
	require.Equal(t, map[string]float64{"push/ok": 1, "pull/error": 3, "none/ok": 0}, by)

	g := fams["t_gauge"].GetMetric()
	require.Len(t, g, 1)
	require.Equal(t, `a "quoted" \ name`+"\n", labelsOf(g[0])["disk"])
	require.Equal(t, -7.0, g[0].GetGauge().GetValue())
	require.Equal(t, 42.5, fams["t_func"].GetMetric()[0].GetGauge().GetValue())

	hist := fams["t_seconds"].GetMetric()[0].GetHistogram()
	require.Equal(t, uint64(5), hist.GetSampleCount())
	require.InDelta(t, 5.235, hist.GetSampleSum(), 1e-9)
	var bounds []float64
	var cum []uint64
	for _, b := range hist.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
		cum = append(cum, b.GetCumulativeCount())
	}
	require.Equal(t, []float64{0.01, 0.04, 0.16}, bounds[:3])
	require.Equal(t, []uint64{2, 3, 3}, cum[:3], "le is inclusive and buckets cumulative")

	op := fams["t_op_seconds"].GetMetric()
	require.Len(t, op, 1)
	require.Equal(t, "push", labelsOf(op[0])["op"])
	require.Equal(t, uint64(2), op[0].GetHistogram().GetSampleCount())
	require.Equal(t, uint64(1), op[0].GetHistogram().GetBucket()[0].GetCumulativeCount())
}

// TestStandardCollectors: the process and Go families carry the names and
// types of the Prometheus Go client's default collectors, with live values.
func TestStandardCollectors(t *testing.T) {
	r := NewRegistry()
	r.MustRegister(NewProcessCollector(), NewGoCollector())
	fams := parse(t, r)
	for name, typ := range map[string]dto.MetricType{
		"process_cpu_seconds_total":     dto.MetricType_COUNTER,
		"process_resident_memory_bytes": dto.MetricType_GAUGE,
		"process_virtual_memory_bytes":  dto.MetricType_GAUGE,
		"process_open_fds":              dto.MetricType_GAUGE,
		"process_max_fds":               dto.MetricType_GAUGE,
		"process_start_time_seconds":    dto.MetricType_GAUGE,
		"go_goroutines":                 dto.MetricType_GAUGE,
		"go_threads":                    dto.MetricType_GAUGE,
		"go_gc_duration_seconds":        dto.MetricType_SUMMARY,
		"go_info":                       dto.MetricType_GAUGE,
		"go_memstats_alloc_bytes":       dto.MetricType_GAUGE,
		"go_memstats_alloc_bytes_total": dto.MetricType_COUNTER,
		"go_sched_gomaxprocs_threads":   dto.MetricType_GAUGE,
	} {
		require.Contains(t, fams, name)
		require.Equal(t, typ, fams[name].GetType(), name)
	}
	require.Positive(t, fams["go_goroutines"].GetMetric()[0].GetGauge().GetValue())
	require.Positive(t, fams["process_resident_memory_bytes"].GetMetric()[0].GetGauge().GetValue())
	require.Positive(t, fams["process_open_fds"].GetMetric()[0].GetGauge().GetValue())
	start := fams["process_start_time_seconds"].GetMetric()[0].GetGauge().GetValue()
	require.Greater(t, start, 1.7e9, "a start time in seconds since the epoch")
	require.Len(t, fams["go_gc_duration_seconds"].GetMetric()[0].GetSummary().GetQuantile(), 5)
}

// TestDuplicateRefused: one family name registered twice fails the
// scrape rather than writing a family twice.
func TestDuplicateRefused(t *testing.T) {
	r := NewRegistry()
	r.MustRegister(NewCounter(Opts{Name: "t_total", Help: "x"}), NewCounter(Opts{Name: "t_total", Help: "y"}))
	require.ErrorContains(t, r.WriteText(&bytes.Buffer{}), "t_total")
}

// TestHandler serves the text format with its content type, to GET only.
func TestHandler(t *testing.T) {
	r := NewRegistry()
	r.MustRegister(NewCounter(Opts{Name: "t_total", Help: "x"}))
	srv := httptest.NewServer(Handler(r))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/plain; version=0.0.4; charset=utf-8", resp.Header.Get("Content-Type"))
	ct := expfmt.ResponseFormat(resp.Header)
	require.Equal(t, expfmt.TypeTextPlain, ct.FormatType())
	resp2, err := http.Post(srv.URL, "text/plain", strings.NewReader(""))
	require.NoError(t, err)
	resp2.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp2.StatusCode)
}
