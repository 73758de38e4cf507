package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SparsesyncNet names sparsesync's network sync (serve and push over
// 127.0.0.1) in a report: the side every network peer is compared with.
const SparsesyncNet = "sparsesync-tcp"

// Peer is a tool sparsesync is compared with, run the way its users run it.
type Peer struct {
	Name        string
	Description string
	// Network peers run a daemon on 127.0.0.1 and a client.
	Network bool
}

// Peers returns every peer, in report order.
func Peers() []Peer {
	return []Peer{
		{Name: "cp", Description: "cp --sparse=always SRC DST, then syncfs"},
		{Name: "cp-reflink", Description: "cp --reflink=always SRC DST on XFS and btrfs, then syncfs"},
		{Name: "rsync", Description: "rsync --ignore-times --inplace --no-whole-file --sparse SRC DST (local), then syncfs"},
		{Name: "qemu-img", Description: "qemu-img convert -f raw -O raw -S 4k SRC DST, then syncfs"},
		{Name: "bmaptool", Description: "bmaptool copy --bmap SRC.bmap SRC DST (the .bmap made beforehand, untimed), then syncfs"},
		{Name: "rsync-daemon", Description: "rsync --daemon on 127.0.0.1 and rsync --ignore-times --inplace --no-whole-file --sparse SRC rsync://127.0.0.1/bench/DST, then syncfs; against sparsesync serve and push over 127.0.0.1", Network: true},
		{Name: "ssync", Description: "Longhorn's ssync: ssync -daemon DST and ssync -host 127.0.0.1 SRC, then syncfs; against sparsesync serve and push over 127.0.0.1", Network: true},
	}
}

// PeerNamed returns the peer called name.
func PeerNamed(name string) (Peer, error) {
	for _, p := range Peers() {
		if p.Name == name {
			return p, nil
		}
	}
	return Peer{}, fmt.Errorf("%w %q", ErrUnknownPeer, name)
}

// tool is how one tool of a case runs.
type tool struct {
	name string
	// skip, when set, says why the tool does not run.
	skip string
	// syncs: the tool makes DST durable itself; otherwise the run ends
	// with syncfs of the target's filesystem.
	syncs bool
	// argv returns the command for one run; profile is where to put a CPU
	// profile ("" for none).
	argv func(src, dst, profile string) []string
	// prepare runs once per source before the rounds, untimed.
	prepare func(src string) error
	// prepareDaemon runs before each start of the daemon, untimed.
	prepareDaemon func(dst string) error
	// daemon, if set, returns a receiving daemon to start (and wait for)
	// before argv runs, listening on 127.0.0.1:port. The client (argv)
	// connects to a counting proxy that forwards to that address: the
	// bytes on the wire.
	daemon func(dst, port string) (argv []string)
	// daemonStays: the daemon serves on after the transfer and is stopped
	// with SIGTERM once the client is done (rsync --daemon, sparsesync
	// serve); otherwise it exits by itself after one transfer (ssync).
	daemonStays bool
	// daemonDone, if set, says whether a daemon that exited with err and
	// printed out finished its transfer normally.
	daemonDone func(err error, out []byte) bool
	// network: a daemon and a client over 127.0.0.1; its ratio is taken
	// against sparsesync's own network sync (serve and push).
	network bool
	// floor marks the physical floor (run in-process); keepHoles, the
	// floor-holes variant (Config.FloorHoles).
	floor, keepHoles bool
	// keepsState: a re-sync starts from the target the tool's own re-sync
	// of the version before left (Config.Steady).
	keepsState bool
}

func (t tool) command() string {
	if t.keepHoles {
		return "the floor, with the source's data written at its offsets (its holes kept), the fastest way kept"
	}
	if t.floor || t.argv == nil {
		return ""
	}
	s := strings.Join(t.argv("SRC", "DST", ""), " ")
	if t.daemon != nil {
		s = strings.Join(t.daemon("DST", "PORT"), " ") + " & " + s
	}
	return s
}

// needs returns a skip reason when a program is not on PATH.
func needs(prog, pkg string) string {
	if _, err := exec.LookPath(prog); err != nil {
		return fmt.Sprintf("%s not found on PATH (install %s)", prog, pkg)
	}
	return ""
}

// peerTool builds the tool for peer p on a filesystem of type fs; for
// network peers, client is the port of the counting proxy the client
// connects to.
func peerTool(p Peer, fs string, client int) tool {
	t := tool{name: p.Name, network: p.Network}
	switch p.Name {
	case "cp":
		t.skip = needs("cp", "coreutils")
		t.argv = func(src, dst, _ string) []string { return []string{"cp", "--sparse=always", src, dst} }
	case "cp-reflink":
		t.skip = needs("cp", "coreutils")
		if fs != "xfs" && fs != "btrfs" {
			t.skip = fmt.Sprintf("%s cannot share blocks between files (reflink needs XFS or btrfs)", fs)
		}
		t.argv = func(src, dst, _ string) []string {
			return []string{"cp", "--reflink=always", src, dst}
		}
	case "rsync":
		t.skip = needs("rsync", "the rsync package")
		t.argv = func(src, dst, _ string) []string {
			// --ignore-times: the benchmark restores the old target seconds
			// before the run, and rsync's quick check would skip a file
			// whose size and mtime (to the second) match; in real use the
			// versions' mtimes differ and rsync runs the delta.
			return []string{"rsync", "--ignore-times", "--inplace", "--no-whole-file", "--sparse", src, dst}
		}
	case "qemu-img":
		t.skip = needs("qemu-img", "qemu-utils")
		t.argv = func(src, dst, _ string) []string {
			return []string{"qemu-img", "convert", "-f", "raw", "-O", "raw", "-S", "4k", src, dst}
		}
	case "bmaptool":
		t.skip = needs("bmaptool", "bmap-tools")
		t.prepare = func(src string) error { return run("bmaptool", "-q", "create", "-o", src+".bmap", src) }
		t.argv = func(src, dst, _ string) []string {
			return []string{"bmaptool", "-q", "copy", "--bmap", src + ".bmap", src, dst}
		}
	case "ssync":
		t.skip = needs("ssync", "it from Longhorn's github.com/longhorn/sparse-tools")
		t.daemon = func(dst, port string) []string {
			return []string{"ssync", "-daemon", "-host", "127.0.0.1", "-port", port, dst}
		}
		t.argv = func(src, _, _ string) []string {
			return []string{"ssync", "-host", "127.0.0.1", "-port", fmt.Sprint(client), src}
		}
		// ssync's daemon (sparse-tools 280e61d) ends every transfer,
		// good or bad, with a fatal log line "Ssync server failed"
		// error="http: Server closed" and exit status 1, once the
		// client has closed it. The client's own status says whether
		// the transfer succeeded, and round 1's result is compared
		// with the source byte for byte.
		t.daemonDone = func(err error, out []byte) bool {
			var ee *exec.ExitError
			return errors.As(err, &ee) && ee.ExitCode() == 1 && bytes.Contains(out, []byte("http: Server closed"))
		}
	case "rsync-daemon":
		t.skip = needs("rsync", "the rsync package")
		t.daemonStays = true
		t.daemon = func(dst, port string) []string {
			conf := filepath.Join(filepath.Dir(dst), "rsyncd.conf")
			return []string{"rsync", "--daemon", "--no-detach", "--address=127.0.0.1", "--port=" + port,
				"--config=" + conf, "--log-file=/dev/null"}
		}
		t.prepareDaemon = func(dst string) error {
			// As root the daemon would switch to nobody, who cannot write
			// the target; "use chroot = false": the path is all it serves.
			user := ""
			if os.Geteuid() == 0 {
				user = "uid = 0\ngid = 0\n"
			}
			conf := fmt.Sprintf("[bench]\npath = %s\nread only = false\nuse chroot = false\n%s", filepath.Dir(dst), user)
			return os.WriteFile(filepath.Join(filepath.Dir(dst), "rsyncd.conf"), []byte(conf), 0o644)
		}
		t.argv = func(src, dst, _ string) []string {
			return []string{"rsync", "--ignore-times", "--inplace", "--no-whole-file", "--sparse", src,
				fmt.Sprintf("rsync://127.0.0.1:%d/bench/%s", client, filepath.Base(dst))}
		}
	}
	return t
}

// sparsesyncNetTool is sparsesync's own network sync, the side network
// peers are compared with: serve, and push through the proxy at client.
func sparsesyncNetTool(cfg *Config, client int) tool {
	t := tool{name: SparsesyncNet, network: true, daemonStays: true}
	if cfg.SparsesyncServe == nil || cfg.SparsesyncPush == nil {
		t.skip = "no sparsesync serve and push commands configured (Config.SparsesyncServe, SparsesyncPush)"
		return t
	}
	t.daemon = func(dst, port string) []string {
		return cfg.SparsesyncServe(filepath.Dir(dst), "127.0.0.1:"+port)
	}
	t.argv = func(src, dst, _ string) []string {
		return cfg.SparsesyncPush(src, fmt.Sprintf("127.0.0.1:%d", client), filepath.Base(dst))
	}
	return t
}

// run runs a command and returns its error with its output.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
