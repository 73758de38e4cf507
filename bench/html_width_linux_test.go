package bench_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/bench/stats"
)

// TestHTMLFitsWindow: a profile table of long Go function names (as real
// profiles have) stays within a 900-pixel window. Chromium lays the page
// out; a script added to a copy of the report (the report itself has none)
// writes the document's scroll width into the title, which --dump-dom
// prints.
func TestHTMLFitsWindow(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if toolsRequired() {
			t.Fatalf("chromium not found and SPARSESYNC_REQUIRE_TOOLS=1: %v", err)
		}
		t.Skipf("skipping the HTML layout check: chromium not found (Debian package chromium): %v", err)
	}
	long := "github.com/sparsesync/sparsesync/internal/coldread.(*Reader).ReadAt.func1.gowrap2.deferwrap1"
	prof := &bench.ProfileSummary{Total: 1.5, Files: []string{"a.pprof"}}
	for i := range 10 {
		prof.Flat = append(prof.Flat, bench.FuncTime{Func: long + strconv.Itoa(i), Seconds: 0.1, Share: 0.07})
		prof.Cum = append(prof.Cum, bench.FuncTime{Func: long + strconv.Itoa(i), Seconds: 0.5, Share: 0.33})
	}
	one := stats.Summary[float64]{N: 1, Median: 1, Min: 1, Max: 1}
	rep := &bench.Report{Runs: 1, Cases: []bench.Case{{
		Workload: "dense", Scenario: bench.ScenarioCopy, Place: "tmpfs", FSType: "tmpfs", Size: 1 << 20, DataBytes: 1 << 20,
		Floor: bench.Tool{Name: "floor", Wall: one, Runs: []bench.Sample{{}}},
		Tools: []bench.Tool{{Name: "sparsesync", Wall: one, Runs: []bench.Sample{{}}, Profile: prof}},
	}}}
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := strings.Replace(b.String(), "</body>", "<script>document.title='width='+document.documentElement.scrollWidth</script></body>", 1)
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--window-size=900,700", "--dump-dom", "file://"+path).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	m := regexp.MustCompile(`<title>width=(\d+)</title>`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no width in the dumped DOM: %.300s", out)
	}
	if w, _ := strconv.Atoi(string(m[1])); w > 900 {
		t.Errorf("the report is %d pixels wide in a 900-pixel window: the profile table overflows", w)
	}
}
