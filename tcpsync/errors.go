package tcpsync

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/sparsesync/sparsesync/internal/errtext"
	"github.com/sparsesync/sparsesync/internal/wire"
)

// Errors of the handshake.
var (
	// ErrUnauthorized means the peer's proof of the shared token was wrong,
	// or the peer could not prove it at all.
	ErrUnauthorized = errors.New("tcpsync: authentication failed")
	// ErrTokenFile means the token file is unusable: too short, or readable
	// by group or others.
	ErrTokenFile = errors.New("tcpsync: bad token file")
	// ErrVersion means the peer speaks another protocol version.
	ErrVersion = wire.ErrVersion
)

// Errors about the remote path.
var (
	// ErrBadPath means the remote name is not a clean relative path (.., an
	// absolute path, NUL or control characters, empty components, too long).
	ErrBadPath = errors.New("tcpsync: bad remote path")
	// ErrPathOutsideRoot means resolving the name would leave the server's
	// root or pass through a symbolic link.
	ErrPathOutsideRoot = errors.New("tcpsync: path escapes the root or crosses a symlink")
	// ErrNotRegular means the remote file is not a regular file.
	ErrNotRegular = errors.New("tcpsync: not a regular file")
	// ErrNotFound means the remote file (or its directory) does not exist.
	ErrNotFound = errors.New("tcpsync: no such remote file")
	// ErrBusy means the server refused the session for now (connection
	// caps, or another session is writing the same target). Retryable.
	ErrBusy = errors.New("tcpsync: server busy")
)

// Errors of the protocol and the data.
var (
	// ErrProtocol means the peer sent something the protocol does not allow:
	// an unknown or unexpected frame, a malformed body, a value out of range.
	ErrProtocol = wire.ErrProtocol
	// ErrFrameTooLarge means a frame header announced more bytes than the
	// limit for its type. Nothing was allocated for it.
	ErrFrameTooLarge = wire.ErrFrameTooLarge
	// ErrIntegrity means a frame after the handshake failed its authentication
	// tag: it was changed, dropped, reordered, replayed or forged on the way.
	// Nothing of it was used.
	ErrIntegrity = errors.New("tcpsync: integrity check failed: a frame was changed on the way")
	// ErrVerify means the end-to-end digest of the receiver differs from the
	// sender's: the target is not identical and is left marked incomplete.
	ErrVerify = errors.New("tcpsync: verification failed")
	// ErrSourceChanged means the source changed size while it was sent.
	ErrSourceChanged = errors.New("tcpsync: source changed during the sync")
	// ErrShutdown means the server is shutting down.
	ErrShutdown = errors.New("tcpsync: server shutting down")
	// ErrRemote is matched by every error reported by the peer whose code
	// maps to no other sentinel.
	ErrRemote = errors.New("tcpsync: remote error")
	// ErrNotSparsesync means the address answered the client's greeting
	// with bytes that are no sparsesync frame: another service listens
	// there (HTTP, SSH, ...). It is permanent: no retry would change it.
	ErrNotSparsesync = errors.New("tcpsync: not a sparsesync server")
	// ErrTooManyExtents means the source has more data extents than one
	// map may carry on the wire (wire.MaxExtents). It is permanent: said before
	// anything is sent, never retried.
	ErrTooManyExtents = errors.New("tcpsync: too many data extents for the protocol")
)

// integrityErr is a frame whose tag (of what: its header, or its type's
// body) did not match, the seq-th of its direction.
func integrityErr(what string, seq uint64) error {
	return fmt.Errorf("%w (%s of frame %d)", ErrIntegrity, what, seq)
}

// decodeError turns an ERROR frame's body into the peer's error.
func decodeError(body []byte) error {
	if len(body) < 2 {
		return fmt.Errorf("%w: short ERROR frame", ErrProtocol)
	}
	return remoteError(binary.LittleEndian.Uint16(body), string(body[2:]))
}

// unexpected is io.ErrUnexpectedEOF for io.EOF: the connection ended in
// the middle of a frame or exchange.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// notSparsesync says what a server that is not ours answered: the first
// bytes it sent, made printable.
func notSparsesync(addr string, answer []byte) error {
	const most = 48
	b := []byte(nil)
	for _, c := range answer[:min(len(answer), most)] {
		switch {
		case c == '\r':
		case c == '\n':
			b = append(b, ' ')
		case c < 0x20 || c > 0x7e:
			b = append(b, '.')
		default:
			b = append(b, c)
		}
	}
	return fmt.Errorf("%w: %s answered %q", ErrNotSparsesync, addr, strings.TrimSpace(string(b)))
}

// codeSentinels pairs the wire's error codes with our sentinels.
var codeSentinels = []struct {
	code uint16
	err  error
}{
	{wire.CodeProtocol, ErrProtocol},
	{wire.CodeUnauthorized, ErrUnauthorized},
	{wire.CodeBadPath, ErrBadPath},
	{wire.CodeOutside, ErrPathOutsideRoot},
	{wire.CodeNotRegular, ErrNotRegular},
	{wire.CodeNotFound, ErrNotFound},
	{wire.CodeBusy, ErrBusy},
	{wire.CodeVerify, ErrVerify},
	{wire.CodeTooLarge, ErrFrameTooLarge},
	{wire.CodeShutdown, ErrShutdown},
	{wire.CodeVersion, ErrVersion},
	{wire.CodeSourceChanged, ErrSourceChanged},
	{wire.CodeIntegrity, ErrIntegrity},
	{wire.CodeStalled, ErrStalled},
	{wire.CodeTooManyExtents, ErrTooManyExtents},
}

// errorCode maps an error to its wire code (one of a pair with remoteError).
func errorCode(err error) uint16 {
	for _, c := range codeSentinels {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return wire.CodeInternal
}

// RemoteError is an error the peer reported in an ERROR frame. It matches
// the sentinel for its code with errors.Is, and always ErrRemote.
type RemoteError struct {
	Code uint16
	Msg  string
}

func (e *RemoteError) Error() string { return "remote: " + e.Msg }

// Is matches ErrRemote and the sentinel of the code.
func (e *RemoteError) Is(target error) bool {
	if target == ErrRemote {
		return true
	}
	for _, c := range codeSentinels {
		if c.code == e.Code {
			return target == c.err
		}
	}
	return false
}

// remoteError turns a received code and message into an error. A server
// before this version sent its sentinel's package name ("tcpsync: no such
// remote file"); the leading one is dropped, as today's server never
// sends it (wireText).
func remoteError(code uint16, msg string) error {
	return &RemoteError{Code: code, Msg: sanitize(strings.TrimPrefix(msg, "tcpsync: "))}
}

// wireText is err's message for the peer: without the package names of the
// sentinels in it, which the peer's own error (and the code) carries.
func wireText(err error) string {
	msg, _ := errtext.Strip(err.Error(), err)
	return msg
}

// sanitize escapes what could forge a log line or repaint a terminal in
// text that came from (or goes to) the peer, and bounds its length: C0
// and C1 controls, DEL, invalid UTF-8, and the bidirectional overrides,
// embeddings, isolates and marks (U+202A-U+202E, U+2066-U+2069, U+200E,
// U+200F, U+061C) that reorder what a terminal shows.
func sanitize(s string) string {
	if len(s) > wire.MaxErrorText {
		s = s[:wire.MaxErrorText]
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		case r >= 0x80 && r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069,
			r == 0x200e, r == 0x200f, r == 0x061c:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// dialError is a failure to open the TCP connection (refused, unknown
// host, unreachable network): the server was never reached.
type dialError struct{ err error }

// Error says "dial" once: net's own dial errors already start with "dial tcp".
func (e *dialError) Error() string {
	if oe, ok := e.err.(*net.OpError); ok && oe.Op == "dial" {
		return e.err.Error()
	}
	return "dial: " + e.err.Error()
}
func (e *dialError) Unwrap() error { return e.err }

// tlsError is a failed TLS handshake: a certificate that does not verify
// or match the pin, a peer that does not speak TLS.
type tlsError struct{ err error }

func (e *tlsError) Error() string { return "TLS handshake: " + e.err.Error() }
func (e *tlsError) Unwrap() error { return e.err }

// hangupError is a connection that ended before the server sent a single
// byte: a busy server closing it to make room (transient), or not a
// sparsesync server, or one that expects TLS. hint, set when every
// attempt ended so, adds the question.
type hangupError struct {
	err  error
	hint bool
}

func (e *hangupError) Error() string {
	if e.hint {
		return "the server hung up before greeting (does it expect TLS?): " + e.err.Error()
	}
	return "the server hung up before greeting: " + e.err.Error()
}
func (e *hangupError) Unwrap() error { return e.err }

// retryable reports whether a failed attempt may be retried. It is an
// allow-list of transient transport failures: a timeout, a connection that
// was established and then dropped (EOF, reset, broken pipe), before the
// greeting too (a busy server refuses, or evicts, a connection so), a TLS
// handshake the server closed (its refusal under TLS is a bare close), a
// busy or restarting server, and, once an earlier attempt reached the
// server, a refused dial (the server is restarting). Everything else fails
// at once: a refused dial or unknown host on the first attempt, TLS and
// pin failures, refusals by the server, local errors (ENOTDIR, EACCES).
// reached says whether an earlier attempt heard from the server.
func retryable(err error, reached bool) bool {
	var re *RemoteError
	if errors.As(err, &re) {
		return re.Code == wire.CodeBusy || re.Code == wire.CodeShutdown
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	timeout := errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
	if errors.As(err, new(*dialError)) {
		if errors.As(err, new(*net.DNSError)) {
			return false // unknown host, or no answer about it
		}
		return timeout || reached && (errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET))
	}
	if timeout {
		return true
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return false // a local file, not the connection
	}
	if errors.As(err, new(*tlsError)) && !closed(err) {
		return false // a certificate, a pin, a peer that does not speak TLS
	}
	return closed(err)
}

// closed reports whether err is a connection the peer closed or reset.
func closed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, net.ErrClosed)
}

// reportable reports whether a session's failure is one the peer should
// hear about in an ERROR frame rather than as a connection cut mid-frame:
// this side's own (the source changed, a local file failed), or a frame
// of the peer's that this side refused (a protocol violation, a frame over
// its limit), on a connection that still works. A peer that stops reading
// meanwhile is cut by the idle watchdog.
func reportable(err error) bool {
	return errors.Is(err, ErrSourceChanged) || errors.Is(err, ErrTooManyExtents) || errors.As(err, new(*fs.PathError)) ||
		errors.Is(err, ErrProtocol) || errors.Is(err, ErrFrameTooLarge)
}

// unblock, once ctx ends, unblocks the goroutines of a session that use c:
// reads always, unless the cause is the connection closed or reset by the
// peer; writes too, unless the cause is reportable, so that the frame
// being written is finished and the caller's ERROR frame follows whole
// frames (a peer that stops reading is cut by the idle watchdog). A peer
// that closed may have sent its ERROR first: the reader reads on to it
// (group prefers it) and then meets the close itself, at once.
// Call the returned stop when done.
func unblock(ctx context.Context, c net.Conn) (stop func() bool) {
	return context.AfterFunc(ctx, func() {
		cause := context.Cause(ctx)
		if closed(cause) && !errors.Is(cause, net.ErrClosed) {
			_ = c.SetWriteDeadline(time.Now())
			return
		}
		if reportable(cause) {
			if cc, ok := c.(interface{ cutReads() }); ok {
				cc.cutReads() // no later re-arm undoes it
				return
			}
			_ = c.SetReadDeadline(time.Now())
			return
		}
		_ = c.SetDeadline(time.Now())
	})
}
