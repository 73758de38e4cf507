package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair of 100 columns: the terminal side
// (what a command writes to) and a reader of everything written to it.
func openPTY(t *testing.T) (tty *os.File, output func() string) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	require.NoError(t, unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	require.NoError(t, unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 100}))
	// Raw output: no \n -> \r\n translation, so the test sees the bytes written.
	termios, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	require.NoError(t, err)
	termios.Oflag &^= unix.OPOST
	require.NoError(t, unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, termios))
	var (
		mu  sync.Mutex
		buf bytes.Buffer
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			mu.Lock()
			buf.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return // EIO once the terminal side is closed
			}
		}
	}()
	t.Setenv("TERM", "xterm")
	return tty, func() string {
		// Read everything written before closing the terminal side: what
		// the reader has not taken by then may be lost with the hangup
		// (seen under load: a whole bar missing). A marker written last
		// says the reader has caught up.
		const marker = "\x00pty-end\x00"
		_, err := tty.WriteString(marker)
		require.NoError(t, err)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			mu.Lock()
			got := strings.Contains(buf.String(), marker)
			mu.Unlock()
			if got {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("pty reader did not catch up")
			}
		}
		tty.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("pty reader did not finish")
		}
		master.Close()
		mu.Lock()
		defer mu.Unlock()
		out, _, _ := strings.Cut(buf.String(), marker)
		return out
	}
}

// checkBarThenLine checks a terminal's output: the bar (label) was drawn,
// then cleared (a carriage return, spaces, a carriage return) before the
// result line, which stands alone and is followed by nothing of the bar.
