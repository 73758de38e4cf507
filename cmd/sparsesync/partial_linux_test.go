package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fsizeEnv makes the test binary run "sparsesync ARGS..." under an
// RLIMIT_FSIZE of that many bytes: writes past it fail with EFBIG (Go
// ignores SIGXFSZ), a disk that fills up half way through a sync.
const fsizeEnv = "SPARSESYNC_CLI_TEST_FSIZE"

// mainEnv makes the test binary run "sparsesync ARGS..." (the children
// bench starts from os.Executable).
const mainEnv = "SPARSESYNC_CLI_TEST_MAIN"

func TestMain(m *testing.M) {
	if v := os.Getenv(fsizeEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err == nil {
			err = unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: n, Max: n})
		}
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(3)
		}
		os.Exit(run(context.Background(), &globalOpts{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:]))
	}
	if os.Getenv(mainEnv) == "1" {
		os.Exit(run(context.Background(), &globalOpts{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func randomFile(t *testing.T, path string, size int) []byte {
	t.Helper()
	b := make([]byte, size)
	rand.Read(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLocalFailedInPlaceSaysDstIsPartial: a re-sync of an existing DST
// that fails half way (the file may not grow past 1 MiB: EFBIG, as a full
// disk gives ENOSPC) leaves DST neither old nor new; the error line says
// so, names DST and says how to finish. rsync users expect the old file
// intact, so silence here loses data.
func TestLocalFailedInPlaceSaysDstIsPartial(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	partials := 0
	// The copy's workers may hit the limit before any write below it
	// lands (DST untouched, and then the line must not say partly): try
	// until one run leaves DST half updated.
	for attempt := 0; attempt < 10 && partials == 0; attempt++ {
		dir := t.TempDir()
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		newer := randomFile(t, src, 4<<20)
		older := randomFile(t, dst, 4<<20) // every block differs: writes past 1 MiB fail
		cmd := exec.Command(exe, "local", "--progress", "never", src, dst)
		cmd.Env = append(os.Environ(), fsizeEnv+"="+strconv.Itoa(1<<20))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err = cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("exit %v, want 1: %s", err, stderr.String())
		}
		line := strings.TrimSuffix(stderr.String(), "\n")
		t.Log(line)
		if strings.Count(line, "\n") != 0 {
			t.Errorf("more than one line: %q", line)
		}
		got, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(got, newer) {
			t.Fatal("dst is the new version: the copy did not fail half way")
		}
		if bytes.Equal(got, older) {
			if strings.Contains(line, "partly updated") {
				t.Errorf("untouched dst said to be partly updated: %q", line)
			}
			continue
		}
		partials++
		for _, want := range []string{dst + " was left partly updated", "run the same command again", "--atomic"} {
			if !strings.Contains(line, want) {
				t.Errorf("error line %q lacks %q", line, want)
			}
		}
	}
	if partials == 0 {
		t.Fatal("no run left dst half updated")
	}
}

// TestLocalFailedAtomicSaysNothingPartial: the same failure with --atomic
// leaves the old DST intact; the line has no such note.
func TestLocalFailedAtomicSaysNothingPartial(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	randomFile(t, src, 4<<20)
	older := randomFile(t, dst, 512<<10)
	cmd := exec.Command(exe, "local", "--atomic", "--progress", "never", src, dst)
	cmd.Env = append(os.Environ(), fsizeEnv+"="+strconv.Itoa(1<<20))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("succeeded past the file size limit")
	}
	if strings.Contains(stderr.String(), "partly updated") {
		t.Errorf("--atomic failure says partly updated: %s", stderr.String())
	}
	got, _ := os.ReadFile(dst)
	if !bytes.Equal(got, older) {
		t.Errorf("--atomic failure changed dst")
	}
}

// TestInterruptedInPlaceLine: an interrupted in-place sync's line is
// "interrupted" and the note (exit 130), not the bare word.
func TestInterruptedInPlaceLine(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	g := &globalOpts{stdout: &out, stderr: &errOut}
	err := &partialError{dst: "/d/dst", err: context.Canceled}
	if code := report(ctx, g, newRootCommand(g), false, err); code != 130 {
		t.Fatalf("exit %d, want 130", code)
	}
	want := "sparsesync: interrupted; /d/dst was left partly updated (neither the old nor the new version): run the same command again to finish (only what still differs is written), or use --atomic to keep the old file until the new one is complete\n"
	if errOut.String() != want {
		t.Fatalf("line %q\nwant %q", errOut.String(), want)
	}
}

// cancelOnWrite cancels a context when the command prints its result: a
// Ctrl-C that arrives just after the work is done.
type cancelOnWrite struct {
	bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.cancel()
	return w.Buffer.Write(p)
}

// TestInterruptAfterSuccessExitsZero: `local --atomic` renamed the new
// file into place and printed its line when the interrupt came; it
// succeeded, and says nothing else.
func TestInterruptAfterSuccessExitsZero(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	want := randomFile(t, src, 1<<20)
	randomFile(t, dst, 1<<20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelOnWrite{cancel: cancel}
	var errOut bytes.Buffer
	g := &globalOpts{stdout: out, stderr: &errOut}
	cmd, wrote, err := execute(ctx, g, []string{"local", "--atomic", "--progress", "never", src, dst})
	code := report(ctx, g, cmd, wrote, err)
	if ctx.Err() == nil {
		t.Fatal("the result was not printed")
	}
	if code != 0 || errOut.Len() != 0 {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, errOut.String())
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, want) {
		t.Fatal("dst is not the new version")
	}
}
