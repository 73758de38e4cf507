package wire

import "errors"

// Errors of the wire. Their texts name tcpsync, whose public sentinels
// they are (tcpsync.ErrProtocol is ErrProtocol): a caller of tcpsync
// reads and matches them as before the wire layer had its own package.
var (
	// ErrProtocol means the peer sent something the protocol does not allow:
	// an unknown or unexpected frame, a malformed body, a value out of range.
	ErrProtocol = errors.New("tcpsync: protocol violation")
	// ErrFrameTooLarge means a frame header announced more bytes than the
	// limit for its type. Nothing was allocated for it.
	ErrFrameTooLarge = errors.New("tcpsync: frame too large")
	// ErrVersion means the peer speaks another protocol version.
	ErrVersion = errors.New("tcpsync: unsupported protocol version")
)

// Error codes, carried in ERROR frames (code u16 | message). tcpsync maps
// them to and from its sentinels, in one function pair.
const (
	CodeInternal uint16 = iota + 1
	CodeProtocol
	CodeUnauthorized
	CodeBadPath
	CodeOutside
	CodeNotRegular
	CodeNotFound
	CodeBusy
	CodeVerify
	CodeTooLarge
	CodeShutdown
	CodeVersion
	CodeSourceChanged
	CodeIntegrity
	CodeStalled
	CodeTooManyExtents
)
