package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// daemonAttempts bounds how many ports a daemon is tried on: another
// process may take a free port between our look and the daemon's bind
// (the daemon then exits and is started again on another port).
const daemonAttempts = 5

// daemonStartTimeout bounds the wait for a daemon that neither listens
// nor exits; it is not a speed limit: a daemon that dies is seen at once.
const daemonStartTimeout = 2 * time.Minute

// daemonProc is a running receiving daemon of a network tool.
type daemonProc struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	port int
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done is closed
}

// Addr is the loopback address the daemon listens on.
func (d *daemonProc) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(d.port)) }

// wait waits for the daemon to exit and returns its exit status.
func (d *daemonProc) wait() error {
	<-d.done
	return d.err
}

// kill kills the daemon and waits for it.
func (d *daemonProc) kill() {
	_ = d.cmd.Process.Kill()
	<-d.done
}

// startDaemon starts t's daemon for dst on a loopback port from pick and
// returns once the daemon itself listens on it (the socket is the
// daemon's: the kernel's socket table and the daemon's descriptors say so,
// so another process on that port is never taken for it). A daemon that
// exits before it listens (its port was taken meanwhile) is started again
// on another port, up to daemonAttempts times.
func startDaemon(ctx context.Context, t tool, dst string, pick func() (int, error)) (*daemonProc, error) {
	var last error
	for range daemonAttempts {
		port, err := pick()
		if err != nil {
			return nil, err
		}
		argv := t.daemon(dst, strconv.Itoa(port))
		d := &daemonProc{port: port, done: make(chan struct{})}
		d.cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
		d.cmd.Stdout, d.cmd.Stderr = &d.out, &d.out
		if err := d.cmd.Start(); err != nil {
			return nil, err
		}
		go func() { d.err = d.cmd.Wait(); close(d.done) }()
		err = waitOwnListener(ctx, d)
		if err == nil {
			return d, nil
		}
		d.kill()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		last = fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, firstLine(d.out.Bytes()))
		if !errors.Is(err, errDaemonExited) {
			return nil, last
		}
	}
	return nil, fmt.Errorf("no port after %d attempts: %w", daemonAttempts, last)
}

var errDaemonExited = errors.New("exited before listening")

// waitOwnListener waits until d's process listens on d.port, or exits.
func waitOwnListener(ctx context.Context, d *daemonProc) error {
	deadline := time.Now().Add(daemonStartTimeout)
	for {
		ok, err := listensOn(d.cmd.Process.Pid, d.port)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-d.done:
			return fmt.Errorf("%w (%v)", errDaemonExited, d.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on port %d after %v", d.port, daemonStartTimeout)
		}
	}
}

// listensOn reports whether process pid holds a TCP socket listening on
// port (any address, IPv4 or IPv6).
func listensOn(pid, port int) (bool, error) {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if err := listeningInodes(table, port, inodes); err != nil {
			return false, err
		}
	}
	if len(inodes) == 0 {
		return false, nil
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false, nil // gone, or not ours to read yet: not listening
	}
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err != nil {
			continue
		}
		if ino, ok := strings.CutPrefix(l, "socket:["); ok && inodes[strings.TrimSuffix(ino, "]")] {
			return true, nil
		}
	}
	return false, nil
}

// listeningInodes adds the inodes of the sockets in LISTEN state on port
// from a /proc/net/tcp-format table.
func listeningInodes(table string, port int, inodes map[string]bool) error {
	f, err := os.Open(table)
	if errors.Is(err, os.ErrNotExist) {
		return nil // no IPv6
	}
	if err != nil {
		return err
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || fs[3] != "0A" || !strings.HasSuffix(fs[1], want) {
			continue
		}
		inodes[fs[9]] = true
	}
	return sc.Err()
}
