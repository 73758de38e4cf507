package bench

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// selfServe is the test binary as "serve ROOT ADDR" (main_test.go's
// TestMain), a daemon that listens on the port it is given.
func selfServe(t *testing.T) tool {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPARSESYNC_BENCH_TEST_EXEC", "1")
	return tool{name: "serve", daemon: func(dst, port string) []string {
		return []string{exe, "serve", dst, "127.0.0.1:" + port}
	}}
}

// takenPort is a loopback port another listener (of this test) holds.
func takenPort(t *testing.T) int {
	thief, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { thief.Close() })
	return thief.Addr().(*net.TCPAddr).Port
}

// TestStartDaemonPortTaken: the port the harness picks is taken by another
// process before the daemon binds it (the race that failed the README's
// test command under load). The harness must not mistake the other
// listener for its daemon: it starts the daemon again on another port and
// hands back that one, owned by the daemon.
func TestStartDaemonPortTaken(t *testing.T) {
	taken := takenPort(t)
	picks := 0
	pick := func() (int, error) {
		picks++
		if picks == 1 {
			return taken, nil
		}
		return freePort()
	}
	d, err := startDaemon(t.Context(), selfServe(t), t.TempDir(), pick)
	if err != nil {
		t.Fatal(err)
	}
	defer d.kill()
	if d.port == taken {
		t.Fatalf("daemon reported on the taken port %d", taken)
	}
	if picks != 2 {
		t.Errorf("%d ports picked, want 2", picks)
	}
	ok, err := listensOn(d.cmd.Process.Pid, d.port)
	if err != nil || !ok {
		t.Fatalf("daemon (pid %d) does not listen on %d: %v", d.cmd.Process.Pid, d.port, err)
	}
	if ok, _ := listensOn(d.cmd.Process.Pid, taken); ok {
		t.Fatalf("daemon listens on the taken port")
	}
	c, err := net.Dial("tcp", d.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestStartDaemonAlwaysFails: a daemon that can never bind is given up
// after a bounded number of ports, with its own words in the error, and
// each attempt ends when the daemon exits (not after a fixed wait).
func TestStartDaemonAlwaysFails(t *testing.T) {
	taken := takenPort(t)
	picks := 0
	pick := func() (int, error) { picks++; return taken, nil }
	_, err := startDaemon(t.Context(), selfServe(t), t.TempDir(), pick)
	if err == nil {
		t.Fatal("started a daemon on a taken port")
	}
	if picks != daemonAttempts {
		t.Errorf("%d attempts, want %d", picks, daemonAttempts)
	}
	t.Log(err)
	if want := strconv.Itoa(taken); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name port %s", err, want)
	}
}
