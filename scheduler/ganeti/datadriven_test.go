package ganeti

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the cases in testdata/*.txt:
//
//	load                      the input is a cluster in text format (missing
//	                          trailing sections are added empty)
//	load file=NAME            a file from testdata/ganeti
//	score                     the hbal score
//	balance [min-gain=F ...]  hbal's moves
//	squeeze [minimal=F] [target=F] [moves=ext|drbd|all]
//
// When hsqueeze is installed, every "squeeze moves=all" is also run through
// it and must take the same decision.
func TestDataDriven(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no data-driven files")
	}
	for _, f := range files {
		datadriven.RunTest(t, f, func(t *testing.T, d *datadriven.TestData) string {
			return runDataDriven(t, d)
		})
	}
}

var ddCluster struct {
	c    *Cluster
	text []byte
}

func runDataDriven(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "load":
		var data []byte
		name := "input"
		if d.HasArg("file") {
			var f string
			d.ScanArgs(t, "file", &f)
			name = f
			b, err := os.ReadFile(filepath.Join("testdata/ganeti", f))
			if err != nil {
				t.Fatal(err)
			}
			data = b
		} else {
			in := d.Input
			if !strings.HasSuffix(in, "\n") {
				in += "\n"
			}
			sections := 1 + strings.Count("\n"+in, "\n\n")
			for ; sections < 4; sections++ {
				in += "\n"
			}
			data = []byte(in)
		}
		c, err := ReadText(bytes.NewReader(data), name)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		s, err := Load(c)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		ddCluster.c, ddCluster.text = c, data
		return fmt.Sprintf("%d groups, %d nodes, %d instances, score %.8f\n", len(c.Groups), len(c.Nodes), len(c.Instances), s.Score())
	case "score":
		s, err := Load(ddCluster.c)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		return fmt.Sprintf("%.8f\n", s.Score())
	case "balance":
		o := DefaultBalanceOptions()
		for _, a := range d.CmdArgs {
			v, _ := strconv.ParseFloat(a.Vals[0], 64)
			switch a.Key {
			case "min-gain":
				o.MinGain = v
			case "min-gain-limit":
				o.MinGainLimit = v
			case "max-rounds":
				o.MaxRounds = int(v)
			case "group":
				o.Group = a.Vals[0]
			}
		}
		r, err := Balance(ddCluster.c, o)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		var b strings.Builder
		fmt.Fprintf(&b, "initial %.8f\n", r.InitialScore)
		for i, m := range r.Moves {
			fmt.Fprintf(&b, "%d. %s %s:%s => %s:%s %.8f %s\n", i+1, m.Instance, m.FromPrimary, m.FromSecondary, m.ToPrimary, m.ToSecondary, m.Score, m.KindName)
		}
		fmt.Fprintf(&b, "final %.8f\n", r.FinalScore)
		return b.String()
	case "squeeze":
		o := SqueezeOptions{MinimalResources: 2, TargetResources: 2, MinimalSet: true, TargetSet: true}
		moves := "ext"
		for _, a := range d.CmdArgs {
			switch a.Key {
			case "minimal":
				o.MinimalResources, _ = strconv.ParseFloat(a.Vals[0], 64)
			case "target":
				o.TargetResources, _ = strconv.ParseFloat(a.Vals[0], 64)
			case "moves":
				moves = a.Vals[0]
			}
		}
		switch moves {
		case "drbd":
			o.Moves = MoveDRBD
		case "all":
			o.Moves = MoveAll
		}
		r, err := Squeeze(ddCluster.c, &o)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		if moves == "all" {
			if _, err := findToolPath("hsqueeze"); err == nil || os.Getenv("SPARSESYNC_REQUIRE_TOOLS") == "1" {
				bin := findTool(t, "hsqueeze")
				p := filepath.Join(t.TempDir(), "c.data")
				if err := os.WriteFile(p, ddCluster.text, 0o644); err != nil {
					t.Fatal(err)
				}
				action, nodes := runHsqueeze(t, bin, p, o.MinimalResources, o.TargetResources)
				if action != r.Action || strings.Join(nodes, ",") != strings.Join(r.Nodes, ",") {
					t.Errorf("%s: hsqueeze says %s %v, we say %s %v", d.Pos, action, nodes, r.Action, r.Nodes)
				}
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "candidates offline=[%s] online=[%s]\n", strings.Join(r.OfflineCandidates, " "), strings.Join(r.OnlineCandidates, " "))
		fmt.Fprintf(&b, "%s [%s]\n", r.Action, strings.Join(r.Nodes, " "))
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "note: %s\n", n)
		}
		for _, m := range r.Moves {
			fmt.Fprintf(&b, "move %s %s => %s %s\n", m.Instance, m.From, m.To, m.Kind)
		}
		return b.String()
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}
