package bench

import (
	"os/exec"
	"testing"
)

// TestSsyncDaemonDone: ssync's daemon ending a transfer with its usual
// exit status 1 and "http: Server closed" counts as done; any other
// failure of it stays a failure of the run.
func TestSsyncDaemonDone(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to make exit statuses")
	}
	tl := peerTool(Peer{Name: "ssync"}, "ext4", 1)
	for _, c := range []struct {
		script string
		done   bool
	}{
		{`echo 'level=fatal msg="Ssync server failed" error="http: Server closed"'; exit 1`, true},
		{`echo 'level=fatal msg="Ssync server failed" error="listen tcp: address already in use"'; exit 1`, false},
		{`echo 'http: Server closed'; exit 2`, false},
	} {
		out, err := exec.Command("sh", "-c", c.script).Output()
		if got := tl.daemonDone(err, out); got != c.done {
			t.Errorf("%q: daemonDone = %v, want %v", c.script, got, c.done)
		}
	}
}
