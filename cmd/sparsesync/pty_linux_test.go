package main

import (
	"bytes"
	"io"
	"os"
	"strconv"
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
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(&buf, master) // ends with EIO once the terminal side is closed
	}()
	t.Setenv("TERM", "xterm")
	return tty, func() string {
		tty.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("pty reader did not finish")
		}
		master.Close()
		return buf.String()
	}
}

// checkBarThenLine checks a terminal's output: the bar (label) was drawn,
// then cleared (a carriage return, spaces, a carriage return) before the
// result line, which stands alone and is followed by nothing of the bar.
