package tcpsync

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/qos"
)

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
	w    *frameBuf
	rbuf []byte
	hdr  [wire.HeaderLen]byte
	// heardFrame is set once a valid frame header arrived: the peer
	// speaks our protocol (firstBytes is only of use before).
	heardFrame bool
	whdr       [wire.HeaderLen]byte
	in, out    *counter
	// preAuth limits what the peer may send before it is authenticated to
	// budget more bytes in all: a frame that would pass it is refused,
	// also once it is spent to exactly 0.
	preAuth bool
	budget  int
	// idle, when positive, is armed as the read deadline before each frame.
	idle time.Duration
	// wd, when set, ends the session when it makes no progress.
	wd *watchdog
	// m, when set, charges the session's I/O to its budget (limit).
	m *meter
	// mem, when set, is the session's memory budget.
	mem *sessionMem
	// keepalive says the peer understands PROGRESS frames (wire.FeatKeepalive
	// in its HELLO).
	keepalive bool
	// worked says the peer understands PROGRESS frames with wire.FlagWorked
	// (wire.FeatWorked in its HELLO).
	worked bool
	// wideMaps says the peer takes extent maps of more than wire.MaxExtents
	// entries (wire.FeatWideMaps in both HELLOs); narrowMaps makes this side
	// play an older peer that does not (tests).
	wideMaps, narrowMaps bool
	// gmac says frames are tagged with AES-GMAC (wire.FeatGMAC in both
	// HELLOs); hmacOnly makes this side play an older peer without it
	// (tests).
	gmac, hmacOnly bool
	// busy says the peer takes PROGRESS frames with wire.FlagBusy (wire.FeatBusy in
	// both HELLOs); notBusy makes this side play a peer without it
	// (tests).
	busy, notBusy bool
	// windows says both HELLOs announce wire.FeatWindows: the maps cross a
	// window at a time (window.go); noWindows makes this side play a peer
	// without it (tests).
	windows, noWindows bool
	// pieceMaps says both HELLOs announce wire.FeatPieceMaps: a fetch
	// (fetch_maps.go) sends each piece's map with the piece; noWindows
	// and narrowMaps turn it off too (an older peer).
	pieceMaps bool
	// batch says both HELLOs announce wire.FeatBatch: small data ranges
	// go in BATCH frames (sender_batch.go); noBatch makes this side play a
	// peer without it (tests).
	batch, noBatch bool
	// smac and rmac, once the handshake is done, tag and check every frame.
	smac, rmac *wire.MAC
	// sentBytes and sentSeq are the bytes on the socket and smac's
	// sequence number at the last flush that emptied the writer.
	sentBytes int64
	sentSeq   uint64
	htag      [wire.HeaderTagLen]byte
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

	// mu orders the read deadline's re-arming against cutReads: once the
	// reads are cut, no re-arm (a frame read, a write counted as progress,
	// a wait on the budget) may push the deadline back, or a reader that
	// the cut should have woken waits out the whole idle timeout (seen
	// under load: a pull's server stuck for its idle timeout after its
	// source changed, its writes finishing the frames in flight having
	// re-armed the deadline the failure had just set).
	mu  sync.Mutex
	cut bool
}

// SetReadDeadline sets the read deadline, or keeps it in the past once
// the reads are cut.
func (c countingConn) SetReadDeadline(t time.Time) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.s.cut {
		t = time.Now()
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline sets both deadlines, the read one as SetReadDeadline does.
func (c countingConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// cutReads makes every read fail at once from now on, whatever re-arms
// the deadline later; writes go on (a failing session finishes the frames
// in flight and sends its ERROR).
func (c countingConn) cutReads() {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.cut = true
	_ = c.Conn.SetReadDeadline(time.Now())
}

// cutOnDone cuts f's reads for good (cutReads) once ctx is done: the
// session's end, by its watchdog or a shutdown. A read deadline set to
// now alone is undone by the next frame's re-arm when the cut lands
// between two reads, and a loop that reads frames without looking at
// ctx (a map arriving) then goes on for as long as the peer keeps
// sending: the watchdog fires once. Call the returned stop when done.
func (f *framer) cutOnDone(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, f.cc.cutReads)
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
				_ = c.SetReadDeadline(time.Now().Add(idle))
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
	return &framer{c: c, cc: cc, r: bufio.NewReaderSize(cc, preAuthBuf), w: newFrameBuf(cc, preAuthBuf), in: in, out: out,
		rbuf: make([]byte, 0, wire.MaxPreAuth)}
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
	f.w = newFrameBuf(f.cc, sessionBuf)
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
func (f *framer) readFrame() (wire.Type, uint8, []byte, error) {
	if f.idle > 0 {
		_ = f.cc.SetReadDeadline(time.Now().Add(f.idle))
	}
	if _, err := io.ReadFull(f.r, f.hdr[:]); err != nil {
		return 0, 0, nil, fmt.Errorf("reading frame header: %w", unexpected(err))
	}
	tagLen := 0
	if f.rmac != nil {
		if _, err := io.ReadFull(f.r, f.htag[:]); err != nil {
			return 0, 0, nil, fmt.Errorf("reading frame header: %w", unexpected(err))
		}
		if !hmac.Equal(f.htag[:], f.rmac.HeaderTag(f.hdr[:])) {
			return 0, 0, nil, integrityErr("header", f.rmac.Seq())
		}
		tagLen = wire.BodyTagLen
	}
	t, flags, n, err := wire.ParseHeader(f.hdr[:])
	if err != nil {
		return 0, 0, nil, err
	}
	f.heardFrame = true
	if f.preAuth {
		if wire.HeaderLen+n > f.budget {
			return 0, 0, nil, fmt.Errorf("%w: %s frame of %d bytes before authentication (budget %d)", ErrFrameTooLarge, t, n, f.budget)
		}
		f.budget -= wire.HeaderLen + n
	}
	// The buffer holds header ‖ body ‖ tag, so the body tag is computed
	// over one slice (GMAC takes its message whole).
	// A data frame's grows it to the largest frame at once (grownBody):
	// it doubled up to the largest DATA frame (three fresh buffers on the
	// way), then a BATCH frame was made to measure.
	if cap(f.rbuf) < wire.HeaderLen+n+tagLen {
		f.rbuf = make([]byte, 0, max(wire.HeaderLen+grownBody(n)+tagLen, min(2*cap(f.rbuf), wire.HeaderLen+wire.MaxFrame+wire.BodyTagLen)))
	}
	frame := f.rbuf[:wire.HeaderLen+n+tagLen]
	copy(frame, f.hdr[:])
	body := frame[wire.HeaderLen:]
	if _, err := io.ReadFull(f.r, body); err != nil {
		return 0, 0, nil, fmt.Errorf("reading %s body: %w", t, unexpected(err))
	}
	if f.rmac != nil {
		seq := f.rmac.Seq()
		if !hmac.Equal(body[n:], f.rmac.FrameTag(frame[:wire.HeaderLen+n])) {
			return 0, 0, nil, integrityErr(t.String(), seq)
		}
	}
	return t, flags, body[:n], nil
}

func (f *framer) flush() error {
	if err := f.w.Flush(); err != nil {
		return fmt.Errorf("sending: %w", err)
	}
	// Every frame tagged so far is on the socket, whole.
	f.sentBytes = f.out.n.Load()
	if f.smac != nil {
		f.sentSeq = f.smac.Seq()
	}
	return nil
}

// send writes one frame and flushes it.
func (f *framer) send(t wire.Type, flags uint8, parts ...[]byte) error {
	if err := f.writeFrame(t, flags, parts...); err != nil {
		return err
	}
	return f.flush()
}

// sendError reports err to the peer as a code and a short message (best
// effort), rendered without its sentinels' package names: the client's
// error carries the code's sentinel, and its line names the command.
func (f *framer) sendError(err error) {
	msg := sanitize(wireText(err))
	b := binary.LittleEndian.AppendUint16(nil, errorCode(err))
	b = append(b, msg...)
	_ = f.c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	if f.send(wire.Error, 0, b) == nil {
		return
	}
	// The session's own writes were cut when it failed (its deadline set
	// to now), and the frame buffer keeps its first error for good: the
	// ERROR would never leave. Drop what is buffered (it never reached the
	// socket) and send the ERROR alone. If a frame was cut halfway, the
	// peer cannot parse what follows and fails with an integrity or
	// protocol error, which is what happened here anyway.
	// Frames dropped with the buffer were tagged: if none of their bytes
	// reached the socket, the ERROR takes the first dropped frame's
	// sequence number, which the peer expects next (else it would read a
	// good ERROR as a forged frame).
	f.w.Reset(f.cc)
	if f.smac != nil && f.out.n.Load() == f.sentBytes {
		f.smac.SetSeq(f.sentSeq)
	}
	_ = f.send(wire.Error, 0, b)
}

// expect reads the next frame and requires type t; an ERROR frame becomes a
// *RemoteError.
func (f *framer) expect(t wire.Type) (uint8, []byte, error) {
	got, flags, body, err := f.readFrame()
	if err != nil {
		return 0, nil, err
	}
	if got == wire.Error {
		return 0, nil, decodeError(body)
	}
	if got != t {
		return 0, nil, fmt.Errorf("%w: got %s, want %s", ErrProtocol, got, t)
	}
	return flags, body, nil
}

// limit starts charging f's session to b. The bytes the handshake moved
// are charged to the wire at once, so the wire budget counts every byte on
// the connection. It must be called before the session's goroutines start.
func (f *framer) limit(ctx context.Context, b qos.Budget) error {
	if b.Read == nil && b.Write == nil && b.Wire == nil {
		return nil
	}
	m := &meter{b: b, ctx: ctx, conn: f.cc, idle: f.idle, wd: f.wd}
	f.m = m
	f.cc.s.m.Store(m)
	return m.wait(b.Wire, f.in.n.Load()+f.out.n.Load())
}

// authenticate switches f to authenticated frames with the keys derived
// from token and the transcript t; client tells the direction.
// It also gives the framer its session buffers: a connection gets them
// when its peer is authenticated, not when it is accepted.
func (f *framer) authenticate(token, t []byte, client bool) error {
	f.grow()
	label := "mac"
	if f.gmac {
		label = "gmac"
	}
	c2s, err := f.newMacer(wire.Proof(token, label+" c2s", t))
	if err != nil {
		return err
	}
	s2c, err := f.newMacer(wire.Proof(token, label+" s2c", t))
	if err != nil {
		return err
	}
	if client {
		f.smac, f.rmac = c2s, s2c
	} else {
		f.smac, f.rmac = s2c, c2s
	}
	return nil
}

// newMacer returns a wire.MAC of the kind the peers agreed on.
func (f *framer) newMacer(key []byte) (*wire.MAC, error) {
	if f.gmac {
		return wire.NewGMAC(key)
	}
	return wire.NewHMAC(key), nil
}
