package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// scrapeMetrics fetches http://addr/metrics and parses it with the
// Prometheus text parser.
func scrapeMetrics(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// counterValue is the value of the counter name with exactly labels.
func counterValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	f := fams[name]
	require.NotNil(t, f, name)
	require.Equal(t, dto.MetricType_COUNTER, f.GetType(), name)
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) == len(labels) {
			match := true
			for k, v := range labels {
				match = match && got[k] == v
			}
			if match {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("%s%v not found", name, labels)
	return 0
}

// TestServeMetrics scrapes `serve --metrics` after a push and a failed
// pull and checks every documented metric's name and type, the counts,
// the standard process and Go collectors, and pprof only with --pprof.
func TestServeMetrics(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	addr, metrics := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", noAuth: true, metrics: "127.0.0.1:0", pprof: true})
	src := filepath.Join(dir, "src.img")
	sparseFile(t, src, 1<<20, map[int64]string{0: "a", 512 << 10: "b"})
	_, stderr, code, _ := runCLI(t, "push", "--no-auth", src, addr, "a.img")
	require.Equal(t, 0, code, stderr)
	_, _, code, _ = runCLI(t, "pull", "--no-auth", addr, "missing.img", filepath.Join(dir, "out.img"))
	require.Equal(t, 1, code)

	// A session is counted when the server has finished it, which may be
	// a moment after the client saw its result: wait for both.
	var fams map[string]*dto.MetricFamily
	require.Eventually(t, func() bool {
		fams = scrapeMetrics(t, metrics)
		n := 0
		for _, m := range fams["sparsesync_syncs_total"].GetMetric() {
			n += int(m.GetCounter().GetValue())
		}
		return n == 2
	}, 10*time.Second, 10*time.Millisecond)
	for name, typ := range map[string]dto.MetricType{
		"sparsesync_syncs_total":           dto.MetricType_COUNTER,
		"sparsesync_bytes_total":           dto.MetricType_COUNTER,
		"sparsesync_sync_duration_seconds": dto.MetricType_HISTOGRAM,
		"process_cpu_seconds_total":        dto.MetricType_COUNTER,
		"process_resident_memory_bytes":    dto.MetricType_GAUGE,
		"go_goroutines":                    dto.MetricType_GAUGE,
		"go_gc_duration_seconds":           dto.MetricType_SUMMARY,
	} {
		require.Contains(t, fams, name)
		require.Equal(t, typ, fams[name].GetType(), name)
	}
	require.NotContains(t, fams, "sparsesync_errors_total", "failures are syncs_total{result=\"error\"}")
	// The documented Metrics table (docs/network.md), row by row, and nothing undocumented.
	documented := readmeServeMetrics(t)
	for name, typ := range documented {
		require.Contains(t, fams, name, "docs/network.md documents %s", name)
		require.Equal(t, typ, strings.ToLower(fams[name].GetType().String()), "docs/network.md's type of %s", name)
	}
	for name := range fams {
		if strings.HasPrefix(name, "sparsesync_") {
			require.Contains(t, documented, name, "%s is not in the Metrics table of docs/network.md", name)
		}
	}
	require.Equal(t, 1.0, counterValue(t, fams, "sparsesync_syncs_total", map[string]string{"op": "push", "result": "ok"}))
	require.Equal(t, 1.0, counterValue(t, fams, "sparsesync_syncs_total", map[string]string{"op": "pull", "result": "error"}))
	require.Equal(t, 2*4096.0, counterValue(t, fams, "sparsesync_bytes_total", map[string]string{"kind": "copied"}))
	for _, kind := range byteKinds {
		counterValue(t, fams, "sparsesync_bytes_total", map[string]string{"kind": kind})
	}
	var pushHist *dto.Histogram
	for _, m := range fams["sparsesync_sync_duration_seconds"].GetMetric() {
		if m.GetLabel()[0].GetValue() == "push" {
			pushHist = m.GetHistogram()
		}
	}
	require.NotNil(t, pushHist)
	require.Equal(t, uint64(1), pushHist.GetSampleCount())
	require.NotEmpty(t, pushHist.GetBucket())

	resp, err := http.Get("http://" + metrics + "/debug/pprof/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "--pprof serves profiles")
}

// readmeServeMetrics reads the "Metrics" table of serve in docs/network.md: metric
// name to type ("counter", "histogram"), for the sparsesync_ rows.
func readmeServeMetrics(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/network.md")
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(b), "- **Metrics:** `serve --metrics ADDR`")
	require.True(t, ok, "docs/network.md has the serve Metrics paragraph")
	row := regexp.MustCompile("(?m)^\\s*\\| `(sparsesync_[a-z_]+)` \\| ([a-z]+) \\|")
	got := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(after[:strings.Index(after, "\n- **")], -1) {
		got[m[1]] = m[2]
	}
	require.Len(t, got, 5, "the table's sparsesync_ rows: %v", got)
	return got
}
