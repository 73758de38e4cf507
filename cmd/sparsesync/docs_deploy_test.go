package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
		skipOrRequire(t, "systemd-analyze not installed (package systemd)")
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
// `kubectl apply --dry-run=client`, and every container's args are a
// command line sparsesync accepts. kubectl asks an API server's discovery
// for the kinds even in a client dry run, so the test gives it one: a
// stand-in that serves the discovery documents of the core and apps/v1
// groups (ConfigMap, Secret, ServiceAccount, DaemonSet) and answers 404 for
// every object, as a cluster where none exists yet. kubectl then parses the
// manifest, maps each kind and builds each object as it would to create it.
// What it cannot do without a real server is check the fields against the
// cluster's OpenAPI schema (--validate=false).
func TestKubernetesManifestDryRun(t *testing.T) {
	manifest := filepath.Join(docsDir, "kubernetes", "sparsesync.yaml")
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	// The args arrays are flow sequences of quoted strings: JSON.
	argsRE := regexp.MustCompile(`(?s)\n\s*args:\s*(\[[^\]]*\])`)
	found := argsRE.FindAllSubmatch(b, -1)
	if len(found) < 2 {
		t.Fatalf("%s: want the args of the disks and serve containers, found %d", manifest, len(found))
	}
	for _, m := range found {
		var args []string
		if err := json.Unmarshal(m[1], &args); err != nil {
			t.Fatalf("%s: args %s: %v", manifest, m[1], err)
		}
		if _, stderr, code, _ := runCLI(t, append(args, "--help")...); code != 0 {
			t.Errorf("%s: sparsesync %s: exit %d: %s", manifest, strings.Join(args, " "), code, stderr)
		}
	}

	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		skipOrRequire(t, "kubectl not installed (Debian: kubernetes-client)")
	}
	srv := httptest.NewServer(fakeDiscovery())
	t.Cleanup(srv.Close)
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), kubectl, "apply", "--dry-run=client", "--validate=false", "-o", "name",
		"--server", srv.URL, "--cache-dir", filepath.Join(home, "cache"), "-f", manifest)
	cmd.Env = append(os.Environ(), "HOME="+home, "KUBECONFIG="+filepath.Join(home, "none"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=client: %v\n%s", err, out)
	}
	for _, want := range []string{"configmap/sparsesync-disks", "daemonset.apps/sparsesync"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kubectl apply --dry-run=client did not build %s:\n%s", want, out)
		}
	}
}

// fakeDiscovery serves what kubectl's discovery reads from an API server
// for the kinds of our manifest, and a 404 Status for any object.
func fakeDiscovery() http.Handler {
	res := func(name, kind string) map[string]any {
		return map[string]any{"name": name, "singularName": strings.ToLower(kind), "namespaced": true, "kind": kind,
			"verbs": []string{"create", "delete", "get", "list", "patch", "update", "watch"}}
	}
	docs := map[string]any{
		"/api": map[string]any{"kind": "APIVersions", "versions": []string{"v1"},
			"serverAddressByClientCIDRs": []map[string]string{{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}}},
		"/apis": map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": []map[string]any{{
			"name": "apps", "versions": []map[string]string{{"groupVersion": "apps/v1", "version": "v1"}},
			"preferredVersion": map[string]string{"groupVersion": "apps/v1", "version": "v1"}}}},
		"/api/v1": map[string]any{"kind": "APIResourceList", "groupVersion": "v1", "resources": []map[string]any{
			res("configmaps", "ConfigMap"), res("secrets", "Secret"), res("serviceaccounts", "ServiceAccount")}},
		"/apis/apps/v1": map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "apps/v1",
			"resources": []map[string]any{res("daemonsets", "DaemonSet")}},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if d, ok := docs[r.URL.Path]; ok {
			_ = json.NewEncoder(w).Encode(d)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
			"reason": "NotFound", "code": 404, "message": r.URL.Path + " not found"})
	})
}

// skipOrRequire skips the test for why, or fails it under
// SPARSESYNC_REQUIRE_TOOLS=1 (CI), where every reference tool must run.
func skipOrRequire(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("SPARSESYNC_REQUIRE_TOOLS") == "1" {
		t.Fatal(why + " (SPARSESYNC_REQUIRE_TOOLS=1)")
	}
	t.Skip(why)
}
