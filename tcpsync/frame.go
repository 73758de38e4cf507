package tcpsync

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"sync/atomic"
	"time"
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
	fTypeEnd
)

func (t frameType) String() string {
	names := [...]string{"?", "HELLO", "AUTH", "OPEN", "OPENED", "SRCINFO", "DSTINFO", "EXTENTS", "DATA", "ZERO",
		"SEGEND", "RESULT", "HASHES", "FIXEND", "DONE", "DONEACK", "ERROR", "PROGRESS",
		"MANIFEST", "FETCH", "PIECEEND"}
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

// counter counts bytes read or written on a connection; a completed write
// is progress for the session's watchdog.
type counter struct {
	n  atomic.Int64
	wd atomic.Pointer[watchdog]
}

// framer reads and writes frames on one connection. Reads happen on one
// goroutine and writes on one (possibly other) goroutine.
type framer struct {
	c    net.Conn
	cc   countingConn
	r    *bufio.Reader
	w    *bufio.Writer
	rbuf []byte
	hdr  [headerLen]byte
	// heardFrame is set once a valid frame header arrived: the peer
	// speaks our protocol (firstBytes is only of use before).
	heardFrame bool
	whdr       [headerLen]byte
	in, out    *counter
	// budget, when positive, is how many more bytes may be read (pre-auth).
	budget int
	// idle, when positive, is armed as the read deadline before each frame.
	idle time.Duration
	// wd, when set, ends the session when it makes no progress.
	wd *watchdog
	// m, when set, charges the session's I/O to its budget (limit).
	m *meter
	// mem, when set, is the session's memory budget.
	mem *sessionMem
	// keepalive says the peer understands PROGRESS frames (featKeepalive
	// in its HELLO).
	keepalive bool
	// worked says the peer understands PROGRESS frames with flagWorked
	// (featWorked in its HELLO).
	worked bool
	// wideMaps says the peer takes extent maps of more than maxExtents
	// entries (featWideMaps in both HELLOs); narrowMaps makes this side
	// play an older peer that does not (tests).
	wideMaps, narrowMaps bool
	// smac and rmac, once the handshake is done, tag and check every frame.
	smac, rmac *macer
	htag       [headerTagLen]byte
}

type countingConn struct {
	net.Conn
	in, out *counter
	s       *sessionConn
}

// sessionConn is what a session adds to its connection once it starts.
type sessionConn struct {
	m    atomic.Pointer[meter] // the session's budget, once it has one
	idle atomic.Int64          // the framer's idle read deadline (ns), once armed
}

// Read charges what arrived to the wire budget, after it arrived; while
// the budget is limited it reads at most a piece of it at once.
func (c countingConn) Read(b []byte) (int, error) {
	m := c.s.m.Load()
	if m != nil {
		b = b[:m.wirePiece(len(b))]
	}
	n, err := c.Conn.Read(b)
	c.in.n.Add(int64(n))
	if m != nil && n > 0 {
		if werr := m.wireRead(n); werr != nil && err == nil {
			err = werr
		}
	}
	return n, err
}

// Write sends b in pieces of the wire budget, each charged before it goes,
// so that the rate holds over short windows. A completed write pushes the
// read deadline back: the peer took our bytes, so it is alive, however
// long its answer takes (a peer holding to a slow budget answers a chunk
// only when it has written or compared it). A peer that neither reads nor
// answers still meets the deadline, once the window of chunks in flight
// is full and the writes stop.
func (c countingConn) Write(b []byte) (int, error) {
	m := c.s.m.Load()
	done := 0
	for done < len(b) {
		p := len(b) - done
		if m != nil {
			p = m.wirePiece(p)
			if err := m.wait(m.b.Wire, int64(p)); err != nil {
				return done, err
			}
		}
		n, err := c.Conn.Write(b[done : done+p])
		c.out.n.Add(int64(n))
		if n > 0 {
			c.out.wd.Load().progress(int64(n))
			if idle := time.Duration(c.s.idle.Load()); idle > 0 {
				_ = c.Conn.SetReadDeadline(time.Now().Add(idle))
			}
		}
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// Buffer sizes: small until the peer is authenticated (a connection that
// never authenticates costs a few KiB, however many there are), then
// grown by grow.
const (
	preAuthBuf = 4 << 10
	sessionBuf = 256 << 10
)

func newFramer(c net.Conn) *framer {
	in, out := new(counter), new(counter)
	cc := countingConn{c, in, out, new(sessionConn)}
	return &framer{c: c, cc: cc, r: bufio.NewReaderSize(cc, preAuthBuf), w: bufio.NewWriterSize(cc, preAuthBuf), in: in, out: out,
		rbuf: make([]byte, 0, maxPreAuth)}
}

// grow gives the framer its session buffers, once the peer is
// authenticated; bytes already buffered are read first. The writer must
// be flushed (the handshake flushes every frame).
func (f *framer) grow() {
	if f.r.Size() >= sessionBuf {
		return
	}
	var src io.Reader = f.cc
	if n := f.r.Buffered(); n > 0 {
		b, _ := f.r.Peek(n)
		src = io.MultiReader(bytes.NewReader(bytes.Clone(b)), f.cc)
	}
	f.r = bufio.NewReaderSize(src, sessionBuf)
	f.w = bufio.NewWriterSize(f.cc, sessionBuf)
}

// setIdle arms d as the read deadline before each frame, pushed back by
// every completed write.
func (f *framer) setIdle(d time.Duration) {
	f.idle = d
	f.cc.s.idle.Store(int64(d))
}

// watch makes w the session's watchdog (completed writes feed it).
func (f *framer) watch(w *watchdog) {
	f.wd = w
	f.out.wd.Store(w)
}

// progress tells the watchdog that the session moved n bytes.
func (f *framer) progress(n int64) { f.wd.progress(n) }

// firstBytes returns the header just read and what is buffered after it:
// what a peer that is no sparsesync server said first.
func (f *framer) firstBytes() []byte {
	more, _ := f.r.Peek(min(f.r.Buffered(), 64))
	return append(bytes.Clone(f.hdr[:]), more...)
}

// readFrame reads one frame. The body is valid until the next readFrame.
// Sizes are checked against the type's limit (and the pre-auth budget)
// before any buffer grows.
func (f *framer) readFrame() (frameType, uint8, []byte, error) {
	if f.idle > 0 {
		_ = f.c.SetReadDeadline(time.Now().Add(f.idle))
	}
	if _, err := io.ReadFull(f.r, f.hdr[:]); err != nil {
		return 0, 0, nil, fmt.Errorf("tcpsync: reading frame header: %w", unexpected(err))
	}
	tagLen := 0
	if f.rmac != nil {
		if _, err := io.ReadFull(f.r, f.htag[:]); err != nil {
			return 0, 0, nil, fmt.Errorf("tcpsync: reading frame header: %w", unexpected(err))
		}
		if !hmac.Equal(f.htag[:], f.rmac.headerTag(f.hdr[:])) {
			return 0, 0, nil, integrityErr("header", f.rmac.seq)
		}
		tagLen = bodyTagLen
	}
	t, flags, n, err := parseHeader(f.hdr[:])
	if err != nil {
		return 0, 0, nil, err
	}
	f.heardFrame = true
	if f.budget > 0 {
		if headerLen+n > f.budget {
			return 0, 0, nil, fmt.Errorf("%w: %s frame of %d bytes before authentication (budget %d)", ErrFrameTooLarge, t, n, f.budget)
		}
		f.budget -= headerLen + n
	}
	if cap(f.rbuf) < n+tagLen {
		f.rbuf = make([]byte, 0, max(n+tagLen, min(2*cap(f.rbuf), maxDataFrame+bodyTagLen)))
	}
	body := f.rbuf[:n+tagLen]
	if _, err := io.ReadFull(f.r, body); err != nil {
		return 0, 0, nil, fmt.Errorf("tcpsync: reading %s body: %w", t, unexpected(err))
	}
	if f.rmac != nil {
		seq := f.rmac.seq
		if !hmac.Equal(body[n:], f.rmac.bodyTag(f.hdr[:], body[:n])) {
			return 0, 0, nil, integrityErr(t.String(), seq)
		}
	}
	return t, flags, body[:n], nil
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

// writeFrame buffers one frame; parts are concatenated into its body.
func (f *framer) writeFrame(t frameType, flags uint8, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n > frameLimit(t) || n > math.MaxUint32 {
		return fmt.Errorf("tcpsync: internal: %s frame of %d bytes over the limit", t, n)
	}
	f.whdr = [headerLen]byte{byte(t), flags}
	binary.LittleEndian.PutUint32(f.whdr[4:], uint32(n))
	if _, err := f.w.Write(f.whdr[:]); err != nil {
		return fmt.Errorf("tcpsync: writing %s: %w", t, err)
	}
	if f.smac != nil {
		if _, err := f.w.Write(f.smac.headerTag(f.whdr[:])); err != nil {
			return fmt.Errorf("tcpsync: writing %s: %w", t, err)
		}
	}
	for _, p := range parts {
		if _, err := f.w.Write(p); err != nil {
			return fmt.Errorf("tcpsync: writing %s: %w", t, err)
		}
	}
	if f.smac != nil {
		if _, err := f.w.Write(f.smac.bodyTag(f.whdr[:], parts...)); err != nil {
			return fmt.Errorf("tcpsync: writing %s: %w", t, err)
		}
	}
	return nil
}

func (f *framer) flush() error {
	if err := f.w.Flush(); err != nil {
		return fmt.Errorf("tcpsync: sending: %w", err)
	}
	return nil
}

// send writes one frame and flushes it.
func (f *framer) send(t frameType, flags uint8, parts ...[]byte) error {
	if err := f.writeFrame(t, flags, parts...); err != nil {
		return err
	}
	return f.flush()
}

// sendError reports err to the peer as a code and a short message (best effort).
func (f *framer) sendError(err error) {
	msg := sanitize(err.Error())
	b := binary.LittleEndian.AppendUint16(nil, errorCode(err))
	b = append(b, msg...)
	_ = f.c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	if f.send(fError, 0, b) == nil {
		return
	}
	// The session's own writes were cut when it failed (its deadline set
	// to now), and a bufio.Writer keeps its first error for good: the
	// ERROR would never leave. Drop what is buffered (it never reached the
	// socket) and send the ERROR alone. If a frame was cut halfway, the
	// peer cannot parse what follows and fails with an integrity or
	// protocol error, which is what happened here anyway.
	f.w.Reset(f.cc)
	_ = f.send(fError, 0, b)
}

// expect reads the next frame and requires type t; an ERROR frame becomes a
// *RemoteError.
func (f *framer) expect(t frameType) (uint8, []byte, error) {
	got, flags, body, err := f.readFrame()
	if err != nil {
		return 0, nil, err
	}
	if got == fError {
		return 0, nil, decodeError(body)
	}
	if got != t {
		return 0, nil, fmt.Errorf("%w: got %s, want %s", ErrProtocol, got, t)
	}
	return flags, body, nil
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
