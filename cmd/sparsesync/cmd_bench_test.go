package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/bench/stats"
)

// TestBenchUsageErrors: unknown names and out-of-range flags are usage
// errors (exit 2) naming the culprit, before anything is made.
func TestBenchUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--dir", dir, "--workload", "nope"}, `unknown workload "nope"`},
		{[]string{"bench", "--dir", dir, "--peer", "scp"}, `unknown peer "scp"`},
		{[]string{"bench", "--dir", dir, "--scenario", "shred"}, `unknown change script "shred"`},
		{[]string{"bench", "--dir", dir, "--runs", "0"}, "--runs 0"},
		{[]string{"bench", "--dir", filepath.Join(dir, "missing")}, "not a directory"},
		{[]string{"bench", "--from", filepath.Join(dir, "missing.json")}, "missing.json"},
	} {
		_, stderr, code, _ := runCLI(t, c.args...)
		wantCode := 2
		if strings.HasSuffix(c.want, ".json") {
			wantCode = 1
		}
		if code != wantCode || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line with %q", c.args, code, stderr, wantCode, c.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused run left %d entries in --dir", len(entries))
	}
}

// TestBenchFromMarkdown re-renders a JSON report as the README's Markdown
// table and as HTML: the ratios printed are the report's.
func TestBenchFromMarkdown(t *testing.T) {
	dir := t.TempDir()
	walls := func(v ...float64) []bench.Sample {
		var s []bench.Sample
		for i, w := range v {
			s = append(s, bench.Sample{Round: i, Wall: w, DeviceWritten: -1, WireBytes: -1})
		}
		return s
	}
	rep := bench.Report{Version: bench.ReportVersion, Runs: 3, Started: time.Unix(0, 0).UTC(), Cases: []bench.Case{{
		Workload: "dense", Scenario: "copy", Place: "ext4", FSType: "ext4", Size: 1 << 30, DataBytes: 1 << 30,
		Floor: bench.Tool{Name: "floor", Runs: walls(1, 1, 1), Wall: stats.Summarize([]float64{1, 1, 1})},
		Tools: []bench.Tool{
			{Name: "sparsesync", Runs: walls(2, 3, 4), Wall: stats.Summarize([]float64{2, 3, 4}), FloorRatio: 3},
			{Name: "cp", Runs: walls(4, 6, 8), Wall: stats.Summarize([]float64{4, 6, 8}), SparsesyncRatio: 0.5, FloorRatio: 6},
			{Name: "ssync", Skipped: "ssync not found"},
		},
	}}}
	js := filepath.Join(dir, "r.json")
	b, err := json.Marshal(&rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(js, b, 0o644); err != nil {
		t.Fatal(err)
	}
	html := filepath.Join(dir, "r.html")
	out, stderr, code, _ := runCLI(t, "bench", "--from", js, "--markdown", "--html", html)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := "| dense | copy | ext4 | 1.0 GiB | 3.000 (2.000-4.000) | 1.000 | 3.00 | 0.50 | skip |"
	if !strings.Contains(out, want) || !strings.Contains(out, "| vs cp | vs ssync |") {
		t.Errorf("markdown:\n%s\nwant a row %s", out, want)
	}
	page, err := os.ReadFile(html)
	if err != nil || !strings.Contains(string(page), "<svg class=time") || !strings.Contains(string(page), "ssync skipped: ssync not found") {
		t.Errorf("html report (%v):\n%.500s", err, page)
	}
}
