package bench

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

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
		{Name: "ssync", Description: "Longhorn's ssync: ssync -daemon DST and ssync -host 127.0.0.1 SRC, then syncfs", Network: true},
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
	// daemon, if set, returns a receiving daemon to start (and wait for)
	// before argv runs, and the address it listens on.
	daemon func(dst string) (argv []string, addr string)
	// floor marks the physical floor (run in-process).
	floor bool
}

func (t tool) command() string {
	if t.floor || t.argv == nil {
		return ""
	}
	s := strings.Join(t.argv("SRC", "DST", ""), " ")
	if t.daemon != nil {
		d, _ := t.daemon("DST")
		s = strings.Join(d, " ") + " & " + s
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

// peerTool builds the tool for peer p on a filesystem of type fs; port is a
// free loopback port for network peers.
func peerTool(p Peer, fs string, port int) tool {
	t := tool{name: p.Name}
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
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		t.daemon = func(dst string) ([]string, string) {
			return []string{"ssync", "-daemon", "-host", "127.0.0.1", "-port", fmt.Sprint(port), dst}, addr
		}
		t.argv = func(src, _, _ string) []string {
			return []string{"ssync", "-host", "127.0.0.1", "-port", fmt.Sprint(port), src}
		}
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
