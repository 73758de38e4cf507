package longhorn

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The golden plans were recorded from the planner before it was made to
// scale (commit "longhorn: record golden plans"), so the faster planner is
// checked move by move against the one it replaced. Regenerate only for a
// deliberate change of decisions: SPARSESYNC_UPDATE_GOLDEN=1 go test -run Golden.
const goldenFile = "testdata/golden_plans.txt.gz"

func updateGolden() bool { return os.Getenv("SPARSESYNC_UPDATE_GOLDEN") != "" }

// goldenPlans renders, for every property-test cluster, the placement plan,
// one rebalance pass and every --until-stable pass.
func goldenPlans(t *testing.T) string {
	var b strings.Builder
	for seed := range uint64(1000) {
		c := randomCluster(seed)
		if err := c.Index(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		fmt.Fprintf(&b, "== seed %d\n", seed)
		p, err := Place(c, &PlaceOptions{Now: propNow})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		b.WriteString(goldenPlaceText(p))
		one, err := Rebalance(c, &RebalanceOptions{Now: propNow})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		b.WriteString("-- one pass\n" + MovesText([][]Move{one}))
		all, err := RebalanceUntilStable(c, &RebalanceOptions{Now: propNow, MaxPasses: 500})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		b.WriteString("-- until stable\n" + MovesText(all))
	}
	return b.String()
}

// goldenPlaceText is the decision part of a placement plan: placements and
// the refusal counts (not the wording around them, which may gain
// explanations).
func goldenPlaceText(p *PlacePlan) string {
	var b strings.Builder
	for _, pl := range p.Placements {
		fmt.Fprintf(&b, "place %s -> %s %s\n", pl.Volume, pl.Node, pl.Disk)
	}
	for _, u := range p.Unschedulable {
		fmt.Fprintf(&b, "unschedulable %s: %d missing: %s\n", u.Volume, u.Missing, sortedReasons(u.Reasons))
	}
	return b.String()
}

// TestGoldenPlans compares every decision on the 1,000 property-test
// clusters with the recorded plans.
func TestGoldenPlans(t *testing.T) {
	got := goldenPlans(t)
	if updateGolden() {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		io.WriteString(zw, got)
		zw.Close()
		if err := os.WriteFile(goldenFile, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	want, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	seed := ""
	for i := range min(len(gl), len(wl)) {
		if strings.HasPrefix(wl[i], "== ") {
			seed = wl[i]
		}
		if gl[i] != wl[i] {
			t.Fatalf("plans differ from %s at line %d (%s):\n got: %s\nwant: %s", goldenFile, i+1, seed, gl[i], wl[i])
		}
	}
	t.Fatalf("plans differ from %s in length: %d lines, want %d", goldenFile, len(gl), len(wl))
}

const scaleGoldenFile = "testdata/golden_scale.sums"

// TestGoldenScale compares the plans on mid-sized and full-sized generated
// clusters with the recorded ones (by hash: the full plans are megabytes).
// The full size runs unless -short.
func TestGoldenScale(t *testing.T) {
	sizes := [][2]int{{300, 1000}, {2000, 7000}}
	if testing.Short() {
		sizes = sizes[:1]
	}
	want := map[string]string{}
	if data, err := os.ReadFile(scaleGoldenFile); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			k, v, _ := strings.Cut(line, " = ")
			want[k] = v
		}
	} else if !updateGolden() {
		t.Fatal(err)
	}
	var out []string
	for _, sz := range sizes {
		c := scaleCluster(1, sz[0], sz[1])
		if err := c.Index(); err != nil {
			t.Fatal(err)
		}
		one, err := Rebalance(c, &RebalanceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		all, err := RebalanceUntilStable(c, &RebalanceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		moves := 0
		for _, p := range all {
			moves += len(p)
		}
		for _, e := range []struct {
			name, text string
			moves      int
		}{
			{"one-pass", MovesText([][]Move{one}), len(one)},
			{"until-stable", MovesText(all), moves},
		} {
			key := fmt.Sprintf("nodes=%d/volumes=%d/%s", sz[0], sz[1], e.name)
			val := fmt.Sprintf("%x %d moves", sha256.Sum256([]byte(e.text)), e.moves)
			if e.name == "until-stable" {
				val += fmt.Sprintf(" %d passes", len(all))
			}
			out = append(out, key+" = "+val)
			if !updateGolden() && want[key] != val {
				t.Errorf("%s: %s, want %s", key, val, want[key])
			}
		}
	}
	if updateGolden() {
		if err := os.WriteFile(filepath.Clean(scaleGoldenFile), []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
