package tcpsync

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
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
	ErrVersion = errors.New("tcpsync: unsupported protocol version")
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
	ErrProtocol = errors.New("tcpsync: protocol violation")
	// ErrFrameTooLarge means a frame header announced more bytes than the
	// limit for its type. Nothing was allocated for it.
	ErrFrameTooLarge = errors.New("tcpsync: frame too large")
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
)

// Wire error codes, carried in ERROR frames.
const (
	codeInternal uint16 = iota + 1
	codeProtocol
	codeUnauthorized
	codeBadPath
	codeOutside
	codeNotRegular
	codeNotFound
	codeBusy
	codeVerify
	codeTooLarge
	codeShutdown
	codeVersion
	codeSourceChanged
	codeIntegrity
	codeStalled
)

var codeSentinels = []struct {
	code uint16
	err  error
}{
	{codeProtocol, ErrProtocol},
	{codeUnauthorized, ErrUnauthorized},
	{codeBadPath, ErrBadPath},
	{codeOutside, ErrPathOutsideRoot},
	{codeNotRegular, ErrNotRegular},
	{codeNotFound, ErrNotFound},
	{codeBusy, ErrBusy},
	{codeVerify, ErrVerify},
	{codeTooLarge, ErrFrameTooLarge},
	{codeShutdown, ErrShutdown},
	{codeVersion, ErrVersion},
	{codeSourceChanged, ErrSourceChanged},
	{codeIntegrity, ErrIntegrity},
	{codeStalled, ErrStalled},
}

// errorCode maps an error to its wire code (one of a pair with remoteError).
func errorCode(err error) uint16 {
	for _, c := range codeSentinels {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return codeInternal
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

// remoteError turns a received code and message into an error.
func remoteError(code uint16, msg string) error {
	return &RemoteError{Code: code, Msg: sanitize(msg)}
}

// sanitize escapes what could forge a log line or repaint a terminal in
// text that came from (or goes to) the peer, and bounds its length: C0
// and C1 controls, DEL, invalid UTF-8, and the bidirectional overrides,
// embeddings, isolates and marks (U+202A-U+202E, U+2066-U+2069, U+200E,
// U+200F, U+061C) that reorder what a terminal shows.
func sanitize(s string) string {
	if len(s) > maxErrorText {
		s = s[:maxErrorText]
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

// retryable reports whether a failed attempt may be retried: transport
// failures and a busy server, not refusals or verification of bad data.
func retryable(err error) bool {
	var re *RemoteError
	if errors.As(err, &re) {
		return re.Code == codeBusy || re.Code == codeShutdown
	}
	switch {
	case errors.Is(err, ErrUnauthorized), errors.Is(err, ErrBadPath), errors.Is(err, ErrPathOutsideRoot),
		errors.Is(err, ErrNotRegular), errors.Is(err, ErrNotFound), errors.Is(err, ErrTokenFile),
		errors.Is(err, ErrVersion), errors.Is(err, ErrProtocol), errors.Is(err, ErrFrameTooLarge),
		errors.Is(err, ErrSourceChanged), errors.Is(err, ErrVerify):
		return false
	}
	return true
}
