// Package internal_test holds the layering of the module as a test, in the
// style of the standard library's go/build/deps_test.go: which of our
// packages may import which, as data, checked against what the non-test
// files really import (go list, for linux, darwin and freebsd), and no
// testing package in the shipped binary.
package internal_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sparsesync/sparsesync"

// depsRules are the layers, lowest first. "a, b < c, d;" means c and d may
// import a and b and everything a and b may import. Every package is defined
// (on the right of a "<") exactly once, after everything on its left, so the
// order is the layering: an import of a package defined later (an upward
// import) is not allowed. Our packages are named without the module prefix.
//
// Pseudo-packages: NONE (nothing), TESTING (the standard library's test-only
// packages: testing, testing/..., and those named ...test, like
// net/http/httptest, but not the runtime's internal ones), CLI (the command's own libraries). The standard
// library's other packages are allowed everywhere.
//
// Test helpers (they import TESTING) live under internal/testutil/ or are
// named ...test; production code must not import them, and the command must
// not link testing at all (TestCommandLinksNoTesting).
const depsRules = `
	# Third-party libraries, each allowed only where a rule below says.
	NONE
	< golang.org/x/sys/unix,
	  golang.org/x/time/rate,
	  github.com/cespare/xxhash/v2,
	  github.com/klauspost/compress/zstd,
	  github.com/pierrec/lz4/v4,
	  github.com/google/pprof/profile;

	NONE
	< github.com/prometheus/client_golang/prometheus,
	  github.com/prometheus/client_golang/prometheus/collectors,
	  github.com/prometheus/client_golang/prometheus/promhttp,
	  github.com/spf13/cobra,
	  github.com/spf13/pflag,
	  golang.org/x/term;

	github.com/prometheus/client_golang/prometheus,
	github.com/prometheus/client_golang/prometheus/collectors,
	github.com/prometheus/client_golang/prometheus/promhttp,
	github.com/spf13/cobra,
	github.com/spf13/pflag,
	golang.org/x/term
	< CLI;

	NONE < TESTING;
	NONE < github.com/stretchr/testify/require;

	# Leaves: pure code, nothing of ours.
	NONE
	< bench/stats,
	  internal/bytesize,
	  internal/errtext,
	  internal/readahead,
	  scheduler/ganeti,
	  scheduler/longhorn,
	  fuzz;

	# The one way to a raw descriptor (SyscallConn().Control): the
	# standard library only, below everything that makes system calls.
	NONE < internal/rawfd;

	# Leaves over the kernel.
	golang.org/x/sys/unix, internal/rawfd
	< internal/coldread,
	  internal/dirlock,
	  internal/kcopy,
	  internal/patternfile,
	  sparse;

	internal/kcopy, sparse < internal/target;
	golang.org/x/sys/unix, sparse < internal/syncmark;

	# A destination's stored block digests: the standard library only.
	NONE < internal/manifest;

	# The one rule of what to copy, compare and punch: pure.
	sparse < internal/destplan;

	# Limits a sync shares with the node's other work.
	golang.org/x/sys/unix, golang.org/x/time/rate, internal/bytesize < qos;
	sparse, github.com/cespare/xxhash/v2 < internal/blockhash;

	# The two ways to move an image.
	internal/coldread, internal/destplan, internal/kcopy, internal/manifest, internal/syncmark, internal/target, qos
	< localsync;

	# tcpsync's protocol on the wire (frames, codecs, tags, codes):
	# nothing of sessions, files or budgets.
	sparse, github.com/klauspost/compress/zstd, github.com/pierrec/lz4/v4
	< internal/wire;

	internal/blockhash, internal/coldread, internal/destplan, internal/errtext, internal/kcopy, internal/readahead, internal/syncmark,
	internal/target, internal/wire, qos
	< tcpsync;

	# Replicas, and what works on them. The format (replica) moves no
	# image over a wire or between files: only the rebuild does.
	# The start check is a pure rule, below the format that reads its input.
	NONE < replica/check;
	internal/coldread, internal/dirlock, internal/target, qos, replica/check < replica;
	replica, localsync, tcpsync < replica/rebuild;
	internal/bytesize, replica/rebuild, scheduler/longhorn < scheduler/disks;
	bench/stats, internal/bytesize, internal/coldread, internal/manifest, internal/patternfile, internal/rawfd, replica,
	github.com/google/pprof/profile
	< bench;

	# The command: everything production, nothing of testing.
	bench, scheduler/disks, scheduler/ganeti, CLI < cmd/sparsesync;

	# Test helpers: they import testing, nothing production imports them.
	TESTING, internal/patternfile < internal/testutil/layout;
	TESTING, golang.org/x/sys/unix < internal/testutil/loopfs;
	TESTING, github.com/stretchr/testify/require < internal/testutil/lhdir;
	TESTING < internal/testutil/heapwatch;
	TESTING, bench, localsync, internal/testutil/loopfs < bench/benchtest;
`

// depsGraph is the layering: each package to the set it may import.
type depsGraph map[string]map[string]bool

// parseDepsRules reads rules in the depsRules syntax.
func parseDepsRules(rules string) (depsGraph, error) {
	g := depsGraph{"NONE": {}}
	var text strings.Builder
	for line := range strings.SplitSeq(rules, "\n") {
		line, _, _ = strings.Cut(line, "#")
		text.WriteString(line + " ")
	}
	for stmt := range strings.SplitSeq(text.String(), ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		var lists [][]string
		for part := range strings.SplitSeq(stmt, "<") {
			var names []string
			for n := range strings.SplitSeq(part, ",") {
				if n = strings.TrimSpace(n); n == "" {
					return nil, fmt.Errorf("rule %q: empty name", strings.TrimSpace(stmt))
				}
				names = append(names, n)
			}
			lists = append(lists, names)
		}
		if len(lists) < 2 {
			return nil, fmt.Errorf("rule %q: no <", strings.TrimSpace(stmt))
		}
		for i := 1; i < len(lists); i++ {
			allowed := map[string]bool{}
			for _, below := range lists[i-1] {
				sub, ok := g[below]
				if !ok {
					return nil, fmt.Errorf("rule %q: %s is used before it is defined", strings.TrimSpace(stmt), below)
				}
				if below != "NONE" {
					allowed[below] = true
				}
				for p := range sub {
					allowed[p] = true
				}
			}
			for _, p := range lists[i] {
				if _, dup := g[p]; dup {
					return nil, fmt.Errorf("rule %q: %s is defined twice", strings.TrimSpace(stmt), p)
				}
				g[p] = allowed
			}
		}
	}
	return g, nil
}

// testOnlyStd reports whether a standard-library package is for tests only.
func testOnlyStd(path string) bool {
	if strings.HasPrefix(path, "internal/") || strings.Contains(path, "/internal/") {
		return false // the runtime's own, like internal/synctest under sync
	}
	return path == "testing" || strings.HasPrefix(path, "testing/") || strings.HasSuffix(path, "test")
}

// listedPackage is what go list says of one package.
type listedPackage struct {
	ImportPath string
	Standard   bool
	GoFiles    []string
	Imports    []string
	Error      *struct{ Err string }
}

// goList runs go list -deps over the module for goos: every package of
// ours and everything they import, without tests.
func goList(t *testing.T, goos string, patterns ...string) map[string]listedPackage {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command to list the packages")
	}
	trackSources(t)
	args := append([]string{"list", "-e", "-deps", "-json=ImportPath,Standard,GoFiles,Imports,Error"}, patterns...)
	cmd := exec.CommandContext(t.Context(), gobin, args...)
	cmd.Dir = ".." // the module root
	cmd.Env = append(os.Environ(), "GOOS="+goos)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("GOOS=%s go list: %v: %s", goos, err, stderr.String())
	}
	pkgs := map[string]listedPackage{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("GOOS=%s go list output: %v", goos, err)
		}
		if p.Error != nil {
			t.Fatalf("GOOS=%s go list %s: %s", goos, p.ImportPath, p.Error.Err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// trackSources stats every Go file, go.mod and go.sum of the module, so go
// test's cache (which records the files a test opens and stats, not what its
// go list child reads) runs the test again after an import changes.
func trackSources(t *testing.T) {
	t.Helper()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != ".." && strings.HasPrefix(d.Name(), "."):
			return filepath.SkipDir
		case d.IsDir() && d.Name() == "testdata":
			return filepath.SkipDir
		case strings.HasSuffix(path, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum":
			_, err := os.Stat(path)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking the module: %v", err)
	}
}

// depsViolations checks every package of ours in pkgs against g, and
// returns one line per import the rules do not allow, per package the rules
// do not define, and per rule naming a package that does not exist.
func depsViolations(g depsGraph, pkgs map[string]listedPackage) []string {
	var bad []string
	ours := map[string]bool{}
	for path, p := range pkgs {
		name, ok := strings.CutPrefix(path, module+"/")
		if !ok || p.Standard {
			continue
		}
		ours[name] = true
		if len(p.GoFiles) == 0 {
			continue // tests only, like this package
		}
		allowed, ok := g[name]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s is not in depsRules: add it to the layer it belongs to", name))
			continue
		}
		for _, imp := range p.Imports {
			switch dep, isOurs := strings.CutPrefix(imp, module+"/"); {
			case isOurs:
				if !allowed[dep] {
					bad = append(bad, fmt.Sprintf("%s imports %s: not allowed by depsRules (an upward import?)", name, dep))
				}
			case pkgs[imp].Standard:
				if testOnlyStd(imp) && !allowed["TESTING"] {
					bad = append(bad, fmt.Sprintf("%s imports %s: only test helpers (internal/testutil/...) may", name, imp))
				}
			case !allowed[imp]:
				bad = append(bad, fmt.Sprintf("%s imports %s: a third-party package depsRules does not allow there", name, imp))
			}
		}
	}
	for name := range g {
		if !strings.Contains(name, ".") && strings.ToUpper(name) != name && !ours[name] {
			bad = append(bad, fmt.Sprintf("depsRules names %s, which is not a package of the module", name))
		}
	}
	slices.Sort(bad)
	return bad
}

// depsGOOS are the systems the module builds for (the _linux.go files and
// their fallbacks import different packages).
var depsGOOS = []string{"linux", "darwin", "freebsd"}

// TestDependencyRules checks every import of every package of ours against
// depsRules.
func TestDependencyRules(t *testing.T) {
	g, err := parseDepsRules(depsRules)
	if err != nil {
		t.Fatal(err)
	}
	for _, goos := range depsGOOS {
		t.Run(goos, func(t *testing.T) {
			for _, v := range depsViolations(g, goList(t, goos, "./...")) {
				t.Error(v)
			}
		})
	}
}

// TestCommandLinksNoTesting checks that the shipped binary links no testing
// package, through our packages or any third-party one.
func TestCommandLinksNoTesting(t *testing.T) {
	for _, goos := range depsGOOS {
		t.Run(goos, func(t *testing.T) {
			pkgs := goList(t, goos, "./cmd/sparsesync")
			if _, ok := pkgs[module+"/cmd/sparsesync"]; !ok {
				t.Fatal("go list did not list cmd/sparsesync")
			}
			for path, p := range pkgs {
				for _, imp := range p.Imports {
					if pkgs[imp].Standard && testOnlyStd(imp) {
						t.Errorf("cmd/sparsesync links %s, through %s", imp, path)
					}
				}
			}
		})
	}
}

// TestDependencyRulesCatch checks the checker on planted graphs: an upward
// import, testing in production code, an unknown package, a cycle in the
// rules.
func TestDependencyRulesCatch(t *testing.T) {
	g, err := parseDepsRules(depsRules)
	if err != nil {
		t.Fatal(err)
	}
	pkg := func(name string, imports ...string) listedPackage {
		return listedPackage{ImportPath: module + "/" + name, GoFiles: []string{"x.go"}, Imports: imports}
	}
	std := func(name string) listedPackage { return listedPackage{ImportPath: name, Standard: true} }
	for _, tc := range []struct {
		name string
		pkgs []listedPackage
		want string
	}{
		{"upward", []listedPackage{pkg("sparse", module+"/localsync"), pkg("localsync")}, "sparse imports localsync"},
		{"testing in bench", []listedPackage{pkg("bench", "testing"), std("testing")}, "bench imports testing"},
		{"test helper in bench", []listedPackage{pkg("bench", module+"/internal/testutil/layout"), pkg("internal/testutil/layout")}, "bench imports internal/testutil/layout"},
		{"the start check reads files", []listedPackage{pkg("replica/check", module+"/sparse"), pkg("sparse")}, "replica/check imports sparse"},
		{"the wire knows tcpsync", []listedPackage{pkg("internal/wire", module+"/tcpsync"), pkg("tcpsync")}, "internal/wire imports tcpsync"},
		{"the wire meters a session", []listedPackage{pkg("internal/wire", module+"/qos"), pkg("qos")}, "internal/wire imports qos"},
		{"undefined package", []listedPackage{pkg("newpkg")}, "newpkg is not in depsRules"},
		{"cli library in a library", []listedPackage{pkg("tcpsync", "github.com/spf13/cobra"), listedPackage{ImportPath: "github.com/spf13/cobra"}}, "tcpsync imports github.com/spf13/cobra"},
	} {
		pkgs := map[string]listedPackage{}
		for _, p := range tc.pkgs {
			pkgs[p.ImportPath] = p
		}
		got := strings.Join(depsViolations(g, pkgs), "\n")
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: violations %q do not include %q", tc.name, got, tc.want)
		}
	}
	for _, rules := range []string{"a < b; b < a;", "NONE < a; NONE < a;", "NONE < a,, b;"} {
		if _, err := parseDepsRules(rules); err == nil {
			t.Errorf("rules %q parsed without an error", rules)
		}
	}
}
