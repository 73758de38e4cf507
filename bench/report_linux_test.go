package bench_test

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// toolsRequired turns a missing tool into a failure (as CI sets it).
func toolsRequired() bool { return os.Getenv("SPARSESYNC_REQUIRE_TOOLS") == "1" }

// tinyReport runs tiny workloads on tmpfs with every peer and returns the
// report as read back from its JSON document.
func tinyReport(t *testing.T) (*bench.Report, bench.Config) {
	t.Helper()
	dir := loopfs.Mount(t, loopfs.Tmpfs, 256<<20)
	cfg := bench.Config{
		Workloads:  []string{"sparse-10pct", "dense"},
		Scenarios:  []string{bench.ScenarioCopy, "trim"},
		KeepCaches: true, // tmpfs has nothing to drop
		Places:     []bench.Place{{Name: "tmpfs", Dir: dir}},
		Runs:       3,
		Gen:        bench.GenOptions{Scale: 1.0 / 512, Seed: 7},
		Sparsesync: selfCommand(t),
		Profile:    true,
	}
	selfNet(t, &cfg)
	var progress int
	cfg.Progress = func(bench.Progress) { progress++ }
	rep, err := bench.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if progress == 0 {
		t.Error("no progress reported")
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	back, err := bench.ReadJSON(&js)
	if err != nil {
		t.Fatalf("reading the JSON back: %v", err)
	}
	return back, cfg
}

// median is the test's own: sort, take the middle or the mean of the two.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func near(a, b float64) bool { return a == b || (a-b < 1e-9*max(a, b) && b-a < 1e-9*max(a, b)) }

// TestReportOnTmpfs generates a report from tiny workloads on tmpfs and
// checks its JSON against the run: every case is there, every peer is
// either measured in every round (and left the source's exact bytes) or
// skipped with a reason, every summary and ratio follows from the runs,
// and the HTML report renders its charts in headless Chromium.
func TestReportOnTmpfs(t *testing.T) {
	rep, cfg := tinyReport(t)
	if rep.Version != bench.ReportVersion || rep.Runs != 3 {
		t.Fatalf("version %d runs %d", rep.Version, rep.Runs)
	}
	if want := len(cfg.Workloads) * len(cfg.Scenarios); len(rep.Cases) != want {
		t.Fatalf("%d cases, want %d", len(rep.Cases), want)
	}
	// sparsesync's network sync runs before the first network peer: the
	// side network peers are compared with.
	peerNames := []string{"sparsesync"}
	network := map[string]bool{}
	for _, p := range bench.Peers() {
		if p.Network && len(network) == 0 {
			peerNames = append(peerNames, bench.SparsesyncNet)
			network[bench.SparsesyncNet] = true
		}
		if p.Network {
			network[p.Name] = true
		}
		peerNames = append(peerNames, p.Name)
	}
	if !network["rsync-daemon"] {
		t.Fatal("no rsync-daemon network peer")
	}
	for _, c := range rep.Cases {
		name := c.Workload + "/" + c.Scenario
		if c.FSType != "tmpfs" {
			t.Errorf("%s: fs type %q, want tmpfs", name, c.FSType)
		}
		if c.DataBytes <= 0 || c.Size < c.DataBytes {
			t.Errorf("%s: size %d data %d", name, c.Size, c.DataBytes)
		}
		if (c.Scenario == bench.ScenarioCopy) != (c.ChangedBytes == 0) {
			t.Errorf("%s: changed bytes %d", name, c.ChangedBytes)
		}
		var names []string
		for _, tl := range c.Tools {
			names = append(names, tl.Name)
		}
		if !slices.Equal(names, peerNames) {
			t.Fatalf("%s: tools %v, want %v", name, names, peerNames)
		}
		var net bench.Tool
		for _, tl := range c.Tools {
			if tl.Network != network[tl.Name] {
				t.Errorf("%s %s: network %v", name, tl.Name, tl.Network)
			}
			if tl.Name == bench.SparsesyncNet {
				net = tl
			}
		}
		if !net.Measured() {
			t.Fatalf("%s: sparsesync's network sync did not run: %+v", name, net)
		}
		ss := c.Tools[0]
		for _, tl := range append([]bench.Tool{c.Floor}, c.Tools...) {
			checkTool(t, name, tl)
		}
		if !ss.Measured() || !c.Floor.Measured() {
			t.Fatalf("%s: sparsesync or the floor did not run: %+v %+v", name, ss, c.Floor)
		}
		if ss.PeakRSS.Median == 0 && strings.HasPrefix(rep.Host.PeakRSS, "GNU time") {
			t.Errorf("%s: no peak RSS though GNU time measured it", name)
		}
		for _, tl := range c.Tools {
			if !tl.Measured() {
				continue
			}
			walls := map[int]float64{}
			for _, r := range tl.Runs {
				walls[r.Round] = r.Wall
			}
			var toFloor, toSS []float64
			for _, r := range c.Floor.Runs {
				toFloor = append(toFloor, walls[r.Round]/r.Wall)
			}
			base := ss
			if tl.Network && tl.Name != bench.SparsesyncNet {
				base = net
				if tl.RatioBase != bench.SparsesyncNet {
					t.Errorf("%s %s: ratio base %q, want %s", name, tl.Name, tl.RatioBase, bench.SparsesyncNet)
				}
			}
			for _, r := range base.Runs {
				toSS = append(toSS, r.Wall/walls[r.Round])
			}
			// Bytes on the wire: counted for every run of a network tool
			// (a copy: at least half its data, whatever the compression),
			// unknown for the local tools.
			var wire []int64
			for _, r := range tl.Runs {
				switch {
				case tl.Network && r.WireBytes <= 0:
					t.Errorf("%s %s: %d bytes on the wire", name, tl.Name, r.WireBytes)
				case !tl.Network && r.WireBytes != -1:
					t.Errorf("%s %s: wire bytes %d for a local tool", name, tl.Name, r.WireBytes)
				}
				if r.WireBytes >= 0 {
					wire = append(wire, r.WireBytes)
				}
			}
			if tl.WireBytes.N != len(wire) || (len(wire) > 0 && (tl.WireBytes.Min != slices.Min(wire) || tl.WireBytes.Max != slices.Max(wire))) {
				t.Errorf("%s %s: wire summary %+v from runs %v", name, tl.Name, tl.WireBytes, wire)
			}
			if tl.Network && c.Scenario == bench.ScenarioCopy && tl.WireBytes.Min < c.DataBytes/2 {
				t.Errorf("%s %s: a copy of %d data bytes took %d bytes on the wire", name, tl.Name, c.DataBytes, tl.WireBytes.Min)
			}
			if !near(tl.FloorRatio, median(toFloor)) {
				t.Errorf("%s %s: floor ratio %v, per-round ratios %v", name, tl.Name, tl.FloorRatio, toFloor)
			}
			if tl.Name == "sparsesync" || tl.Name == bench.SparsesyncNet {
				if tl.SparsesyncRatio != 0 {
					t.Errorf("%s: sparsesync has a ratio to itself: %v", name, tl.SparsesyncRatio)
				}
				continue
			}
			if !near(tl.SparsesyncRatio, median(toSS)) {
				t.Errorf("%s %s: sparsesync ratio %v, per-round ratios %v", name, tl.Name, tl.SparsesyncRatio, toSS)
			}
			// A paired ratio lies between the extremes of the per-round ratios.
			if tl.SparsesyncRatio < slices.Min(toSS) || tl.SparsesyncRatio > slices.Max(toSS) {
				t.Errorf("%s %s: ratio %v outside %v", name, tl.Name, tl.SparsesyncRatio, toSS)
			}
		}
		if ss.Profile == nil || len(ss.Profile.Files) != 3 {
			t.Errorf("%s: sparsesync profile %+v, want 3 profiles summarised", name, ss.Profile)
		}
	}
	renderHTML(t, rep)
}

// checkTool: measured in every round and correct, or skipped with a
// reason; an installed peer must be measured (cp-reflink cannot on tmpfs).
func checkTool(t *testing.T, name string, tl bench.Tool) {
	t.Helper()
	switch {
	case tl.Skipped != "":
		if tl.Measured() {
			t.Errorf("%s %s: skipped (%s) but has runs", name, tl.Name, tl.Skipped)
		}
		prog := tl.Name
		if prog == "rsync-daemon" {
			prog = "rsync"
		}
		if prog == "cp-reflink" {
			if !strings.Contains(tl.Skipped, "tmpfs") {
				t.Errorf("%s cp-reflink: skip reason %q does not name the filesystem", name, tl.Skipped)
			}
			return
		}
		if _, err := exec.LookPath(prog); err == nil {
			t.Errorf("%s %s: skipped (%s) though %s is installed", name, tl.Name, tl.Skipped, prog)
		} else if toolsRequired() && prog != "ssync" {
			t.Errorf("%s %s: not installed and SPARSESYNC_REQUIRE_TOOLS=1: %s", name, tl.Name, tl.Skipped)
		}
	case tl.Error != "":
		t.Errorf("%s %s: %s", name, tl.Name, tl.Error)
	case tl.WrongResult != "" && tl.Name == "sparsesync":
		t.Errorf("%s: sparsesync left a wrong result: %s", name, tl.WrongResult)
	default:
		if tl.WrongResult != "" {
			t.Logf("%s %s left a wrong result (reported): %s", name, tl.Name, tl.WrongResult)
		}
		if len(tl.Runs) != 3 {
			t.Errorf("%s %s: %d runs, want 3", name, tl.Name, len(tl.Runs))
		}
		var walls []float64
		rounds := map[int]bool{}
		for _, r := range tl.Runs {
			walls = append(walls, r.Wall)
			rounds[r.Round] = true
			if r.Wall <= 0 {
				t.Errorf("%s %s: wall %v", name, tl.Name, r.Wall)
			}
			if tl.Name != "floor" && r.User+r.Sys <= 0 {
				t.Errorf("%s %s: no CPU time recorded: %+v", name, tl.Name, r)
			}
		}
		if len(rounds) != len(tl.Runs) {
			t.Errorf("%s %s: rounds repeat: %+v", name, tl.Name, tl.Runs)
		}
		if tl.Wall.N != len(walls) || !near(tl.Wall.Median, median(walls)) || tl.Wall.Min != slices.Min(walls) || tl.Wall.Max != slices.Max(walls) {
			t.Errorf("%s %s: wall summary %+v from runs %v", name, tl.Name, tl.Wall, walls)
		}
	}
}

// renderHTML writes the HTML report and has headless Chromium take a
// screenshot of it: the charts must be there in pixels, bars in
// sparsesync's and the peers' colours in the first chart's area.
func renderHTML(t *testing.T, rep *bench.Report) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if toolsRequired() {
			t.Fatalf("chromium not found and SPARSESYNC_REQUIRE_TOOLS=1: %v", err)
		}
		t.Skipf("skipping the HTML rendering check: chromium not found (Debian package chromium): %v", err)
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, forbidden := range []string{"<script", "http://", "https://", "src="} {
		if strings.Contains(strings.ReplaceAll(html, `xmlns="http://www.w3.org/2000/svg"`, ""), forbidden) {
			t.Errorf("the report is not self-contained: it has %q", forbidden)
		}
	}
	if n := strings.Count(html, "<svg class=time"); n != len(rep.Cases) {
		t.Errorf("%d time charts for %d cases", n, len(rep.Cases))
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "shot.png")
	if out := os.Getenv("SPARSESYNC_BENCH_OUT"); out != "" {
		// Keep the report and its screenshot to look at.
		defer func() {
			var js bytes.Buffer
			_ = rep.WriteJSON(&js)
			_ = os.WriteFile(filepath.Join(out, "report.json"), js.Bytes(), 0o644)
			_ = os.WriteFile(filepath.Join(out, "report.html"), b.Bytes(), 0o644)
			if png, err := os.ReadFile(shot); err == nil {
				_ = os.WriteFile(filepath.Join(out, "report.png"), png, 0o644)
			}
		}()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--hide-scrollbars", "--window-size=900,700",
		"--screenshot="+shot, "file://"+page)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v: %s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// The first chart sits below the heading, the host line and the first
	// case's title: the area from y=60 to 450, x=0 to 800 holds it.
	area := image.Rect(0, 60, 800, 450).Intersect(img.Bounds())
	var nonWhite, blue, orange, red int
	for y := area.Min.Y; y < area.Max.Y; y++ {
		for x := area.Min.X; x < area.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			if r < 245 || g < 245 || bl < 245 {
				nonWhite++
			}
			switch {
			case close8(r, 0x1f) && close8(g, 0x5f) && close8(bl, 0xd1):
				blue++
			case close8(r, 0xe8) && close8(g, 0x77) && close8(bl, 0x2e):
				orange++
			case close8(r, 0xc0) && close8(g, 0x14) && close8(bl, 0x2b):
				red++
			}
		}
	}
	t.Logf("screenshot %v: %d non-white pixels in the chart area, %d sparsesync-blue, %d peer-orange, %d floor-red", img.Bounds(), nonWhite, blue, orange, red)
	if nonWhite < 2000 || blue < 50 || orange < 50 || red < 20 {
		t.Errorf("the screenshot does not show the chart: %d non-white, %d blue, %d orange, %d red pixels", nonWhite, blue, orange, red)
	}
}

func close8(a, b uint32) bool { return a+6 >= b && b+6 >= a }

// TestDeviceWrittenOnExt4: on a loop filesystem, every run's bytes written
// to the target device come from the block device's counters and cover at
// least the data the run had to write (a copy of the dense workload:
// all of it), and the rounds rotate the order of the tools.
func TestDeviceWrittenOnExt4(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop filesystems need root")
	}
	dir := loopfs.Mount(t, loopfs.Ext4, 256<<20)
	cfg := bench.Config{
		Workloads:  []string{"dense"},
		Scenarios:  []string{bench.ScenarioCopy},
		Peers:      []string{"cp"},
		KeepCaches: true,
		Places:     []bench.Place{{Name: "ext4", Dir: dir}},
		Runs:       3,
		Gen:        bench.GenOptions{Scale: 4.0 / 1024, Seed: 1}, // 4 MiB
		Sparsesync: selfCommand(t),
	}
	rep, err := bench.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Cases[0]
	if !c.DeviceStats {
		t.Fatalf("no device statistics for a loop filesystem (%s)", c.FSType)
	}
	first := map[int]string{}
	for _, tl := range append([]bench.Tool{c.Floor}, c.Tools...) {
		if len(tl.Runs) != 3 {
			t.Fatalf("%s: %d runs (%s%s)", tl.Name, len(tl.Runs), tl.Skipped, tl.Error)
		}
		orders := map[int]bool{}
		for _, r := range tl.Runs {
			if r.DeviceWritten < c.DataBytes {
				t.Errorf("%s round %d: %d bytes written to the device, %d bytes of data copied", tl.Name, r.Round, r.DeviceWritten, c.DataBytes)
			}
			orders[r.Order] = true
			if r.Order == 0 {
				first[r.Round] = tl.Name
			}
		}
		if len(orders) != 3 {
			t.Errorf("%s ran at the same place in different rounds: %+v", tl.Name, tl.Runs)
		}
	}
	if len(first) != 3 || first[0] == first[1] || first[1] == first[2] || first[0] == first[2] {
		t.Errorf("the first tool of each round: %v, want a different one each round", first)
	}
}

// TestSteadyResyncReadsLess: with Config.Steady, sparsesync's re-sync
// starts from the target its own re-sync of the version before left, and
// with that target's manifest it reads much less from the device (the
// kernel's counters) than the first re-sync of a plain copy, which reads
// both files; both results are exact.
func TestSteadyResyncReadsLess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop filesystems need root")
	}
	dir := loopfs.Mount(t, loopfs.Ext4, 512<<20)
	read := map[bool]int64{}
	for _, steady := range []bool{false, true} {
		cfg := bench.Config{
			Workloads:  []string{"dense"},
			Scenarios:  []string{"resync-1pct"},
			Peers:      []string{},
			Places:     []bench.Place{{Name: "ext4", Dir: dir}},
			Runs:       2,
			Gen:        bench.GenOptions{Scale: 32.0 / 1024, Seed: 1}, // 32 MiB
			Sparsesync: selfCommand(t),
			Steady:     steady,
		}
		rep, err := bench.Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := rep.Cases[0]
		ss := c.Tools[0]
		if c.Steady != steady || len(ss.Runs) != 2 || ss.WrongResult != "" || ss.Error != "" {
			t.Fatalf("steady %v: case steady %v, %d runs, %q %q", steady, c.Steady, len(ss.Runs), ss.WrongResult, ss.Error)
		}
		for _, r := range ss.Runs {
			if r.DeviceRead < c.DataBytes {
				t.Errorf("steady %v: %d bytes read from the device, less than the %d-byte source", steady, r.DeviceRead, c.DataBytes)
			}
			read[steady] = max(read[steady], r.DeviceRead)
		}
	}
	t.Logf("device reads: first re-sync %d, steady %d", read[false], read[true])
	if read[true]*3 > read[false]*2 {
		t.Errorf("a steady re-sync read %d bytes, the first re-sync %d: want at most two thirds", read[true], read[false])
	}
}

// TestFloorHolesOnExt4: with Config.FloorHoles a copy case races the tool
// floor-holes (the floor writing the source's data at its offsets), which
// writes at least the source's data to the device in every round; a
// re-sync case has no such tool.
func TestFloorHolesOnExt4(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop filesystems need root")
	}
	dir := loopfs.Mount(t, loopfs.Ext4, 256<<20)
	cfg := bench.Config{
		Workloads:  []string{"tiny-extents"},
		Scenarios:  []string{bench.ScenarioCopy, "resync-1pct"},
		Places:     []bench.Place{{Name: "ext4", Dir: dir}},
		Runs:       2,
		Gen:        bench.GenOptions{Scale: 1.0 / 100, Seed: 1}, // 1,000 extents of 4 KiB
		Sparsesync: selfCommand(t),
		FloorHoles: true,
	}
	rep, err := bench.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Cases {
		var holes *bench.Tool
		for i := range c.Tools {
			if c.Tools[i].Name == bench.FloorHoles {
				holes = &c.Tools[i]
			}
		}
		if c.Scenario != bench.ScenarioCopy {
			if holes != nil {
				t.Errorf("%s: a %s tool in a re-sync case", c.Scenario, bench.FloorHoles)
			}
			continue
		}
		if holes == nil || len(holes.Runs) != 2 || holes.Command == "" {
			t.Fatalf("copy: %s missing or not run twice: %+v", bench.FloorHoles, holes)
		}
		for _, r := range holes.Runs {
			if r.DeviceWritten < c.DataBytes {
				t.Errorf("copy round %d: %s wrote %d bytes to the device, want at least the %d of data", r.Round, bench.FloorHoles, r.DeviceWritten, c.DataBytes)
			}
		}
	}
}
