package tcpsync

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// TestRetryableAllowList: only transient transport failures are retried.
func TestRetryableAllowList(t *testing.T) {
	opErr := func(op string, err error) error {
		return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, err)}
	}
	wrapped := func(err error) error { return fmt.Errorf("reading frame header: %w", err) }
	for _, tc := range []struct {
		name    string
		err     error
		reached bool
		want    bool
	}{
		{"reset after the greeting", wrapped(opErr("read", syscall.ECONNRESET)), false, true},
		{"EOF after the greeting", wrapped(io.ErrUnexpectedEOF), false, true},
		{"broken pipe", wrapped(opErr("write", syscall.EPIPE)), false, true},
		{"read timeout", wrapped(opErr("read", os.ErrDeadlineExceeded)), false, true},
		{"busy server", remoteError(wire.CodeBusy, "too many"), false, true},
		{"server shutting down", remoteError(wire.CodeShutdown, "bye"), false, true},
		{"refused first dial", &dialError{opErr("dial", syscall.ECONNREFUSED)}, false, false},
		{"refused dial after a dropped session", &dialError{opErr("dial", syscall.ECONNREFUSED)}, true, true},
		{"dial timeout", &dialError{opErr("dial", os.ErrDeadlineExceeded)}, false, true},
		{"unknown host", &dialError{&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}}}, false, false},
		{"unknown host, later", &dialError{&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}}}, true, false},
		{"TLS verification", &tlsError{x509.UnknownAuthorityError{}}, false, false},
		{"TLS bare close (a refusal under TLS)", &tlsError{io.EOF}, false, true},
		{"TLS reset", &tlsError{opErr("read", syscall.ECONNRESET)}, false, true},
		{"hang-up before any greeting (a refusal or an eviction)", &hangupError{err: wrapped(io.ErrUnexpectedEOF)}, false, true},
		{"hang-up before the greeting, after a session", &hangupError{err: wrapped(io.ErrUnexpectedEOF)}, true, true},
		{"local ENOTDIR", &fs.PathError{Op: "open", Path: "f/x", Err: syscall.ENOTDIR}, false, false},
		{"local EACCES", &fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, false, false},
		{"unauthorized", ErrUnauthorized, true, false},
		{"remote not found", remoteError(wire.CodeNotFound, "x"), true, false},
		{"verify", ErrVerify, true, false},
		{"canceled", context.Canceled, true, false},
		{"unknown error", fmt.Errorf("something else"), true, false},
	} {
		require.Equal(t, tc.want, retryable(tc.err, tc.reached), tc.name)
	}
}

// TestMaxAttempts: 0 is the default (a first attempt and 5 retries), 1 is
// one attempt, a negative count is refused before dialling.
func TestMaxAttempts(t *testing.T) {
	for _, c := range []struct{ in, want int }{{0, 6}, {1, 1}, {4, 4}} {
		got, err := (&Options{NoAuth: true, MaxAttempts: c.in}).withDefaults()
		require.NoError(t, err)
		require.Equal(t, c.want, got.MaxAttempts, "MaxAttempts %d", c.in)
	}
	dialled := false
	_, err := Pull(t.Context(), "127.0.0.1:1", "x.img", filepath.Join(t.TempDir(), "x.img"), &Options{NoAuth: true, MaxAttempts: -1,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			dialled = true
			return nil, errors.New("dialled")
		}})
	require.ErrorContains(t, err, "max attempts -1 is negative")
	require.False(t, dialled)
}
