package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnitsVerify: the systemd units under docs/systemd pass
// `systemd-analyze verify` with nothing to say (it exits 0 on unknown keys
// and bad values, only warning: any output fails the test). The units'
// /usr/local/bin/sparsesync is replaced by an executable that exists here.
func TestSystemdUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (package systemd)")
	}
	units, err := filepath.Glob(filepath.Join(docsDir, "systemd", "*.service"))
	if err != nil || len(units) < 2 {
		t.Fatalf("units under docs/systemd: %v %v", units, err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "ExecStart=/usr/local/bin/sparsesync ") {
			t.Fatalf("%s: no ExecStart=/usr/local/bin/sparsesync", u)
		}
		text := strings.ReplaceAll(string(b), "/usr/local/bin/sparsesync", exe)
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(u)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(u), func(t *testing.T) {
			out, err := exec.Command(analyze, "verify", "--man=no", filepath.Join(dir, filepath.Base(u))).CombinedOutput()
			if err != nil || len(strings.TrimSpace(string(out))) > 0 {
				t.Fatalf("systemd-analyze verify %s: %v\n%s", u, err, out)
			}
		})
		// The command line the unit runs is one sparsesync accepts.
		line := ""
		for _, l := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(l, "ExecStart=/usr/local/bin/sparsesync "); ok {
				line = rest
			}
		}
		args := append(strings.Fields(line), "--help")
		if _, stderr, code, _ := runCLI(t, args...); code != 0 {
			t.Errorf("%s: sparsesync %s: exit %d: %s", u, strings.Join(args, " "), code, stderr)
		}
	}
}

// TestKubernetesManifestDryRun: docs/kubernetes/sparsesync.yaml passes
// `kubectl apply --dry-run=client`. kubectl needs an API server to map
// kinds and fetch the schema even for a client dry run: without a
// reachable cluster the test skips, saying so.
func TestKubernetesManifestDryRun(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed (package kubernetes-client)")
	}
	if out, err := exec.Command(kubectl, "get", "--raw", "/version").CombinedOutput(); err != nil {
		t.Skipf("kubectl reaches no API server (needed for kinds and schema even with --dry-run=client): %v: %s", err, firstLineOf(out))
	}
	out, err := exec.Command(kubectl, "apply", "--dry-run=client", "-f", filepath.Join(docsDir, "kubernetes", "sparsesync.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=client: %v\n%s", err, out)
	}
}

func firstLineOf(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}
