package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// buildBinary builds sparsesync once per test run into a directory any
// user can read, and returns its path.
func buildBinary(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command to build the binary")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp(reachableTempDir(), "sparsesync-bin-")
		if err != nil {
			buildErr = err
			return
		}
		_ = os.Chmod(dir, 0o755)
		builtBin = filepath.Join(dir, "sparsesync")
		// -buildvcs=auto on the command line: a GOFLAGS=-buildvcs=false in
		// the user's go env must not hide the revision TestVersionStamped
		// checks.
		out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", builtBin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return builtBin
}

// reachableTempDir returns os.TempDir() when every directory on its path
// lets others in (uid 65534 must reach the binary and the scratch root),
// else /tmp: a private TMPDIR (mktemp -d, as .ci/run makes) is 0700.
func reachableTempDir() string {
	dir := os.TempDir()
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return dir
		}
	}
}

// readmeSections are the sections whose ```sh blocks the test runs, in
// order: the README's quick start, then the docs pages it links to.
var readmeSections = []struct{ file, heading string }{
	{"../../README.md", "## Quick start"},
	{"../../docs/network.md", "# Network sync"},
	{"../../docs/replicas.md", "## Replica directories"},
}

// readmeBlocks returns the ```sh blocks of those sections, in order.
func readmeBlocks(t *testing.T) []string {
	var blocks []string
	for _, s := range readmeSections {
		b, err := os.ReadFile(s.file)
		require.NoError(t, err)
		n := len(blocks)
		section, in := "", false
		var cur strings.Builder
		for line := range strings.SplitSeq(string(b), "\n") {
			switch {
			case in && line == "```":
				blocks = append(blocks, cur.String())
				cur.Reset()
				in = false
			case in:
				cur.WriteString(line + "\n")
			case strings.HasPrefix(line, "#"):
				section = line
			case line == "```sh":
				in = strings.HasPrefix(section, s.heading)
			}
		}
		require.Greater(t, len(blocks), n, "%s has a ```sh block under %q", s.file, s.heading)
	}
	require.GreaterOrEqual(t, len(blocks), 4, "Quick start (2), network sync, replica blocks")
	return blocks
}

// readmeLines joins continuation lines and maps what only exists on the
// reader's machines onto the scratch directory: "go install" and the PATH
// line (the test puts the built binary on PATH), the server host (a
// loopback server), /etc and /var paths, optional [...] parts.
func readmeLines(block string) []string {
	block = strings.ReplaceAll(block, "\\\n", " ")
	optional := regexp.MustCompile(`\s*\[[^\]]*\]`)
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(strings.TrimPrefix(l, "CGO_ENABLED=0 "), "go install ") || strings.HasPrefix(l, "export PATH=") {
			continue
		}
		l = optional.ReplaceAllString(l, "")
		l = strings.NewReplacer("/etc/sparsesync.token", "sparsesync.token", "--token-file tok ", "--token-file sparsesync.token ",
			"/var/lib/images", "images", "--listen 10.0.0.2:7373", "--listen 127.0.0.1:0").Replace(l)
		lines = append(lines, l)
	}
	return lines
}

// TestREADMECommands runs the README's command blocks in order on a scratch
// directory, as the caller and, when root with SPARSESYNC_HEAVY=1 (as CI
// runs it), as uid 65534 too, each line checked to
// exit 0, and the results checked where the README promises something.
func TestREADMECommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the README (-short)")
	}
	bin := buildBinary(t)
	users := []string{"self"}
	switch {
	case os.Geteuid() != 0:
	case os.Getenv("SPARSESYNC_HEAVY") == "1":
		users = append(users, "nobody")
	default:
		t.Log("as root: the run as uid 65534 needs SPARSESYNC_HEAVY=1 (.ci/run sets it)")
	}
	for _, user := range users {
		t.Run(user, func(t *testing.T) { runREADME(t, bin, user == "nobody") })
	}
}

func runREADME(t *testing.T, bin string, asNobody bool) {
	base, err := os.MkdirTemp(reachableTempDir(), "sparsesync-readme-") // t.TempDir's parent is 0700: no way in for uid 65534
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	scratch := filepath.Join(base, "scratch")
	require.NoError(t, os.MkdirAll(filepath.Join(scratch, "images"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(scratch, "tmp"), 0o755))
	var cred *syscall.Credential
	if asNobody {
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
		require.NoError(t, filepath.Walk(scratch, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Chown(p, 65534, 65534)
		}))
	}
	env := []string{"PATH=" + filepath.Dir(bin) + ":/usr/bin:/bin", "HOME=" + scratch, "TMPDIR=" + filepath.Join(scratch, "tmp"), "LANG=C"}
	command := func(ctx context.Context, line string) *exec.Cmd {
		c := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", line)
		c.Dir, c.Env = scratch, env
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return c
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	var serverAddr string
	var server *exec.Cmd
	stopServer := func() {
		if server == nil {
			return
		}
		require.NoError(t, server.Process.Signal(syscall.SIGTERM))
		err := server.Wait()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, 130, ee.ExitCode(), "serve ends with status 130 on SIGTERM")
		server = nil
	}
	defer stopServer()
	ran := 0
	for _, block := range readmeBlocks(t) {
		for _, line := range readmeLines(block) {
			if serverAddr != "" {
				line = strings.ReplaceAll(line, "10.0.0.2:7373", serverAddr)
			}
			if strings.HasPrefix(line, "sparsesync serve ") {
				// Started in the background (the README's other host); its
				// first line says where it listens.
				server = command(ctx, "exec "+line)
				stderr, err := server.StderrPipe()
				require.NoError(t, err)
				require.NoError(t, server.Start())
				sc := bufio.NewScanner(stderr)
				require.True(t, sc.Scan(), "serve printed nothing: %v", sc.Err())
				m := regexp.MustCompile(`^sparsesync: serving images on (127\.0\.0\.1:\d+) \(token authentication\)$`).FindStringSubmatch(sc.Text())
				require.NotNil(t, m, "serve's first line: %q", sc.Text())
				serverAddr = m[1]
				go func() {
					for sc.Scan() {
					}
				}()
				continue
			}
			var out, errOut bytes.Buffer
			c := command(ctx, line)
			c.Stdout, c.Stderr = &out, &errOut
			err := c.Run()
			require.NoError(t, err, "README line %q\nstdout: %s\nstderr: %s", line, out.String(), errOut.String())
			ran++
			t.Logf("$ %s\n%s", line, out.String())
			checkREADMELine(t, scratch, line, out.String())
		}
	}
	stopServer()
	require.GreaterOrEqual(t, ran, 12)
}

// checkREADMELine checks what the README says a line does, beyond exit 0.
func checkREADMELine(t *testing.T, scratch, line, stdout string) {
	switch {
	case strings.HasPrefix(line, "sparsesync push "):
		require.Contains(t, stdout, `"verified":true`)
		same(t, filepath.Join(scratch, "disk.img"), filepath.Join(scratch, "images", "vm1", "disk.img"))
	case strings.HasPrefix(line, "sparsesync pull "):
		same(t, filepath.Join(scratch, "disk.img"), filepath.Join(scratch, "copy.img"))
	case strings.HasPrefix(line, "sparsesync local --json disk.img copy.img"):
		require.Contains(t, stdout, `"copied_bytes":4096`, "re-sync: only the changed block is written")
	case strings.HasPrefix(line, "sparsesync replica check --salvage"):
		require.Equal(t, 1, strings.Count(stdout, "RW "), "exactly one replica stays RW: %s", stdout)
	}
}

func same(t *testing.T, a, b string) {
	x, err := os.ReadFile(a)
	require.NoError(t, err)
	y, err := os.ReadFile(b)
	require.NoError(t, err)
	require.True(t, bytes.Equal(x, y), "%s and %s differ", a, b)
}
