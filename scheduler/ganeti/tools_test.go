package ganeti

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// findTool returns the path of a Ganeti htools binary (hbal, hsqueeze). When
// it is missing the test is skipped, unless SPARSESYNC_REQUIRE_TOOLS=1 (as in
// CI, which installs ganeti-htools-3.0), in which case it fails.
func findTool(t testing.TB, name string) string {
	t.Helper()
	if p, err := findToolPath(name); err == nil {
		return p
	}
	msg := name + " not found (install Debian's ganeti-htools-3.0 to run the differential tests against Ganeti)"
	if os.Getenv("SPARSESYNC_REQUIRE_TOOLS") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func findToolPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join("/usr/lib/ganeti/3.0/usr/bin", name)
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

// runHsqueeze runs hsqueeze on a file and returns its action and node list.
func runHsqueeze(t testing.TB, bin, file string, minF, tgtF float64) (string, []string) {
	t.Helper()
	args := []string{"-t", file, "--minimal-resources=" + strconv.FormatFloat(minF, 'f', -1, 64),
		"--target-resources=" + strconv.FormatFloat(tgtF, 'f', -1, 64)}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("hsqueeze %v: %v\n%s", args, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	action := ""
	var nodes []string
	for _, l := range lines {
		switch l = strings.TrimSpace(l); l {
		case "'Nodes to offline'":
			action = ActionOffline
		case "'Nodes to online'":
			action = ActionOnline
		case "'No action'":
			action = ActionNone
		case "":
		default:
			if action != "" {
				nodes = append(nodes, l)
			}
		}
	}
	if action == "" {
		t.Fatalf("hsqueeze %v: no action in output:\n%s", args, out)
	}
	return action, nodes
}

// hbalScores runs hbal and returns the initial and final scores.
func hbalScores(t testing.TB, bin, file string, extra ...string) (float64, float64) {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"-t", file}, extra...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("hbal %s: %v\n%s", file, err, out)
	}
	var ini, fin float64 = -1, -1
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "Initial score: "); ok {
			ini, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			fin = ini
		}
		if i := strings.Index(l, "Cluster score improved from "); i >= 0 {
			f := strings.Fields(l[i:])
			fin, _ = strconv.ParseFloat(f[len(f)-1], 64)
		}
	}
	if ini < 0 {
		t.Fatalf("hbal %s: no initial score in output:\n%s", file, out)
	}
	return ini, fin
}

func writeTextFile(t testing.TB, c *Cluster) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteText(&buf, c); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "cluster.data")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
