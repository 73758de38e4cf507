package tcpsync

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Frame header: type u8 | flags u8 | reserved u16 (zero) | length u32, little-endian.
const headerLen = 8

type frameType uint8

const (
	fHello    frameType = iota + 1 // magic, version, features, nonce
	fAuth                          // HMAC proof
	fOpen                          // client → server: op, flags, block size, path
	fOpened                        // server → client: ok
	fSrcInfo                       // sender → receiver: size, block size, identity
	fDstInfo                       // receiver → sender: size, quick, resume offset
	fExtents                       // a piece of an encoded sparse.Map (flagLast ends it)
	fData                          // off u64 | rawLen u32 | payload (flags: codec)
	fZero                          // off u64 | len u64: all-zero source range
	fSegEnd                        // chunk index and the sender's sums
	fResult                        // receiver: chunk equal
	fHashes                        // receiver: chunk differs, here are its block hashes
	fFixEnd                        // sender: the fix-up of a chunk is complete
	fDone                          // sender: all chunks sent
	fDoneAck                       // receiver: verified and durable
	fError                         // code u16 | message
	fProgress                      // receiver, during its read-back: bytes read back so far (u64); only to a peer with featKeepalive. With flagWorked, any time: bytes applied or compared so far; only to a peer with featWorked
	fManifest                      // fetch source: per-piece SHA-256 prefixes of its data (flagLast ends them)
	fFetch                         // fetch client: piece index, seed, the block hashes it holds
	fPieceEnd                      // fetch source: the piece's DATA/ZERO frames are complete
	fWindow                        // lo u64 | hi u64 | an encoded sparse.Map of size hi: one side's data in [lo, hi) (featWindows)
	fTypeEnd
)

func (t frameType) String() string {
	names := [...]string{"?", "HELLO", "AUTH", "OPEN", "OPENED", "SRCINFO", "DSTINFO", "EXTENTS", "DATA", "ZERO",
		"SEGEND", "RESULT", "HASHES", "FIXEND", "DONE", "DONEACK", "ERROR", "PROGRESS",
		"MANIFEST", "FETCH", "PIECEEND", "WINDOW"}
	if int(t) < len(names) {
		return names[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Flags.
const (
	flagLast      = 1 << 0 // last EXTENTS frame of a map
	flagWorked    = 1 << 0 // PROGRESS: bytes the receiver applied or compared, not read back
	flagCodecMask = 3 << 1 // DATA codec
	flagCodecLZ4  = 1 << 1
	flagCodecZstd = 2 << 1
)

// Limits, checked before anything is allocated.
const (
	maxDataPayload  = 1 << 20             // raw bytes in one DATA frame
	maxDataFrame    = maxDataPayload + 64 // DATA body incl. its header (compressed output never exceeds raw: raw is sent otherwise)
	maxFrame        = 64 << 10            // any other frame
	maxPreAuth      = 4 << 10             // bytes a peer may send before it is authenticated
	maxErrorText    = 1 << 10
	maxPath         = 4096
	maxComponent    = 255
	maxIdentity     = 1 << 10
	maxExtents      = 1 << 20 // entries of an extent map, for a peer without featWideMaps
	maxMapBytes     = maxExtents * 2 * binaryMaxVarint
	maxSize         = 1 << 50 // file size
	minBlock        = 4 << 10
	maxBlock        = 1 << 20
	chunkBlocks     = 4096 // blocks per chunk (the unit of hierarchical compare, verification and resume)
	binaryMaxVarint = 10
)

func frameLimit(t frameType) int {
	if t == fData {
		return maxDataFrame
	}
	return maxFrame
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseHeader validates a frame header against the limits.
func parseHeader(h []byte) (frameType, uint8, int, error) {
	t, flags := frameType(h[0]), h[1]
	if t == 0 || t >= fTypeEnd {
		return 0, 0, 0, fmt.Errorf("%w: unknown frame type %d", ErrProtocol, h[0])
	}
	if h[2] != 0 || h[3] != 0 {
		return 0, 0, 0, fmt.Errorf("%w: reserved header bits set in %s", ErrProtocol, t)
	}
	n := binary.LittleEndian.Uint32(h[4:])
	if n > uint32(frameLimit(t)) {
		return 0, 0, 0, fmt.Errorf("%w: %s frame of %d bytes (limit %d)", ErrFrameTooLarge, t, n, frameLimit(t))
	}
	return t, flags, int(n), nil
}

func decodeError(body []byte) error {
	if len(body) < 2 {
		return fmt.Errorf("%w: short ERROR frame", ErrProtocol)
	}
	return remoteError(binary.LittleEndian.Uint16(body), string(body[2:]))
}

// dec is a bounds-checked little-endian body decoder. The first failure
// sticks; callers check err once at the end.
type dec struct {
	b   []byte
	err error
	t   frameType
}

func (d *dec) need(n int) bool {
	if d.err != nil {
		return false
	}
	if len(d.b) < n {
		d.err = fmt.Errorf("%w: %s body truncated", ErrProtocol, d.t)
		return false
	}
	return true
}

func (d *dec) u8() uint8 {
	if !d.need(1) {
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) u32() uint32 {
	if !d.need(4) {
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *dec) u64() uint64 {
	if !d.need(8) {
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// bytes returns a length-prefixed (u32) byte string of at most limit bytes.
func (d *dec) bytes(limit int) []byte {
	n := d.u32()
	if d.err != nil {
		return nil
	}
	if n > uint32(limit) {
		d.err = fmt.Errorf("%w: %s field of %d bytes (limit %d)", ErrProtocol, d.t, n, limit)
		return nil
	}
	if !d.need(int(n)) {
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

// end requires that the whole body was consumed.
func (d *dec) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes in %s", ErrProtocol, len(d.b), d.t)
	}
	return d.err
}

func appendBytes(b, v []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// offLen checks a range received from the peer against the size, with no
// overflow: 0 <= off, 0 < n, off+n <= size.
func offLen(t frameType, off, n uint64, size int64) (int64, int64, error) {
	if n == 0 || off > uint64(size) || n > uint64(size)-off {
		return 0, 0, fmt.Errorf("%w: %s range at %d of %d bytes outside the size %d", ErrProtocol, t, off, n, size)
	}
	return int64(off), int64(n), nil
}
