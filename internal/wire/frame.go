package wire

import (
	"encoding/binary"
	"fmt"
)

// HeaderLen is the length of a frame header: type u8 | flags u8 |
// reserved u16 (zero) | length u32, little-endian.
const HeaderLen = 8

// Type is a frame's type, the header's first byte.
type Type uint8

// The frame types, in the order of their codes (HELLO is 1).
const (
	Hello    Type = iota + 1 // magic, version, features, nonce
	Auth                     // HMAC proof
	Open                     // client → server: op, flags, block size, path
	Opened                   // server → client: ok
	SrcInfo                  // sender → receiver: size, block size, identity
	DstInfo                  // receiver → sender: size, quick, resume offset
	Extents                  // a piece of an encoded sparse.Map (FlagLast ends it)
	Data                     // off u64 | rawLen u32 | payload (flags: codec)
	Zero                     // off u64 | len u64: all-zero source range
	SegEnd                   // chunk index and the sender's sums
	Result                   // receiver: chunk equal
	Hashes                   // receiver: chunk differs, here are its block hashes
	FixEnd                   // sender: the fix-up of a chunk is complete
	Done                     // sender: all chunks sent
	DoneAck                  // receiver: verified and durable
	Error                    // code u16 | message
	Progress                 // receiver, during its read-back: bytes read back so far (u64); only to a peer with FeatKeepalive. With FlagWorked, any time: bytes applied or compared so far; only to a peer with FeatWorked
	Manifest                 // fetch source: per-piece SHA-256 prefixes of its data (FlagLast ends them)
	Fetch                    // fetch client: piece index, seed, the block hashes it holds
	PieceEnd                 // fetch source: the piece's DATA/ZERO frames are complete
	Window                   // lo u64 | hi u64 | an encoded sparse.Map of size hi: one side's data in [lo, hi) (FeatWindows)
	Batch                    // count u16 | count × (off u64 | len u32) | payload (flags: codec), batch.go (FeatBatch)
	typeEnd
)

// String returns the type's name as the protocol documents it (DATA,
// WINDOW), or type(n) for a code that names no type.
func (t Type) String() string {
	names := [...]string{"?", "HELLO", "AUTH", "OPEN", "OPENED", "SRCINFO", "DSTINFO", "EXTENTS", "DATA", "ZERO",
		"SEGEND", "RESULT", "HASHES", "FIXEND", "DONE", "DONEACK", "ERROR", "PROGRESS",
		"MANIFEST", "FETCH", "PIECEEND", "WINDOW", "BATCH"}
	if int(t) < len(names) {
		return names[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Flags, the header's second byte; their meaning depends on the type.
const (
	FlagLast      = 1 << 0 // last EXTENTS frame of a map
	FlagWorked    = 1 << 0 // PROGRESS: bytes the receiver applied or compared, not read back
	FlagBusy      = 1 << 1 // PROGRESS: the side is in a phase that counts no byte (tcpsync's busy.go); its count is 0
	FlagPieceMap  = 1 << 0 // FETCH: asks for the piece's map (a WINDOW frame), not its blocks (FeatPieceMaps)
	FlagCodecMask = 3 << 1 // DATA and BATCH codec
	FlagCodecLZ4  = 1 << 1
	FlagCodecZstd = 2 << 1
)

// Limits, checked before anything is allocated.
const (
	MaxDataPayload = 1 << 20             // raw bytes in one DATA frame
	MaxDataFrame   = MaxDataPayload + 64 // DATA body incl. its header (compressed output never exceeds raw: raw is sent otherwise)
	MaxFrame       = 64 << 10            // any other frame
	MaxPreAuth     = 4 << 10             // bytes a peer may send before it is authenticated
	MaxErrorText   = 1 << 10             // bytes of an ERROR frame's message
	MaxPath        = 4096                // bytes of a remote path
	MaxComponent   = 255                 // bytes of one component of a remote path
	MaxIdentity    = 1 << 10             // bytes of a source's identity
	MaxExtents     = 1 << 20             // entries of an extent map, for a peer without FeatWideMaps
	MaxSize        = 1 << 50             // file size
	MinBlock       = 4 << 10             // block size, least
	MaxBlock       = 1 << 20             // block size, most
	ChunkBlocks    = 4096                // blocks per chunk (the unit of hierarchical compare, verification and resume)
)

// MaxBody is the most bytes of any frame's body (Limit's largest).
const MaxBody = max(MaxDataFrame, MaxBatchFrame, MaxFrame)

// Limit is the most bytes a body of type t may have.
func (t Type) Limit() int {
	switch t {
	case Data:
		return MaxDataFrame
	case Batch:
		return MaxBatchFrame
	}
	return MaxFrame
}

// PutHeader writes the header of a frame of type t with flags and a body
// of n bytes to h.
func PutHeader(h *[HeaderLen]byte, t Type, flags uint8, n int) {
	*h = [HeaderLen]byte{byte(t), flags}
	binary.LittleEndian.PutUint32(h[4:], uint32(n))
}

// ParseHeader validates a frame header against the limits and returns its
// type, flags and body length. An unknown type or reserved bits set is
// ErrProtocol, a length over the type's Limit ErrFrameTooLarge.
func ParseHeader(h []byte) (Type, uint8, int, error) {
	t, flags := Type(h[0]), h[1]
	if t == 0 || t >= typeEnd {
		return 0, 0, 0, fmt.Errorf("%w: unknown frame type %d", ErrProtocol, h[0])
	}
	if h[2] != 0 || h[3] != 0 {
		return 0, 0, 0, fmt.Errorf("%w: reserved header bits set in %s", ErrProtocol, t)
	}
	n := binary.LittleEndian.Uint32(h[4:])
	if n > uint32(t.Limit()) {
		return 0, 0, 0, fmt.Errorf("%w: %s frame of %d bytes (limit %d)", ErrFrameTooLarge, t, n, t.Limit())
	}
	return t, flags, int(n), nil
}

// Dec is a bounds-checked little-endian decoder of the body B of a frame
// of type T. The first failure sticks in Err (ErrProtocol); callers check
// it once at the end. What is left to decode is B.
type Dec struct {
	B   []byte
	Err error
	T   Type
}

func (d *Dec) need(n int) bool {
	if d.Err != nil {
		return false
	}
	if len(d.B) < n {
		d.Err = fmt.Errorf("%w: %s body truncated", ErrProtocol, d.T)
		return false
	}
	return true
}

// U8 decodes a byte.
func (d *Dec) U8() uint8 {
	if b := d.Take(1); b != nil {
		return b[0]
	}
	return 0
}

// U32 decodes a little-endian uint32.
func (d *Dec) U32() uint32 {
	if b := d.Take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

// U64 decodes a little-endian uint64.
func (d *Dec) U64() uint64 {
	if b := d.Take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// Bytes returns a length-prefixed (u32) byte string of at most limit bytes.
func (d *Dec) Bytes(limit int) []byte {
	n := d.U32()
	if d.Err != nil {
		return nil
	}
	if n > uint32(limit) {
		d.Err = fmt.Errorf("%w: %s field of %d bytes (limit %d)", ErrProtocol, d.T, n, limit)
		return nil
	}
	return d.Take(int(n))
}

// Take returns the next n bytes, or nil once the body is short of them.
func (d *Dec) Take(n int) []byte {
	if !d.need(n) {
		return nil
	}
	v := d.B[:n]
	d.B = d.B[n:]
	return v
}

// End requires that the whole body was consumed and returns Err.
func (d *Dec) End() error {
	if d.Err == nil && len(d.B) != 0 {
		d.Err = fmt.Errorf("%w: %d trailing bytes in %s", ErrProtocol, len(d.B), d.T)
	}
	return d.Err
}

// AppendBytes appends v as a length-prefixed (u32) byte string, as Bytes
// decodes it.
func AppendBytes(b, v []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// OffLen checks a range received from the peer in a frame of type t
// against the size, with no overflow: 0 <= off, 0 < n, off+n <= size.
func OffLen(t Type, off, n uint64, size int64) (int64, int64, error) {
	if n == 0 || off > uint64(size) || n > uint64(size)-off {
		return 0, 0, fmt.Errorf("%w: %s range at %d of %d bytes outside the size %d", ErrProtocol, t, off, n, size)
	}
	return int64(off), int64(n), nil
}
