package tcpsync

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// pbuf is a pooled buffer shared by the frames that point into it.
type pbuf struct {
	b    []byte
	refs atomic.Int32
	pool *bufPool
}

func (p *pbuf) ref() { p.refs.Add(1) }

func (p *pbuf) unref() {
	if p.refs.Add(-1) == 0 {
		p.pool.put(p)
	}
}

// bufPool is a fixed set of buffers: taking one blocks when all are in
// flight, which bounds a session's memory.
type bufPool struct{ free chan *pbuf }

func newBufPool(n, size int) *bufPool {
	p := &bufPool{free: make(chan *pbuf, n)}
	for _, b := range coldread.AlignedBuffers(n, size) {
		p.free <- &pbuf{b: b, pool: p} // aligned: cold source reads go direct
	}
	return p
}

func (p *bufPool) get(ctx context.Context) (*pbuf, error) {
	select {
	case b := <-p.free:
		b.refs.Store(1)
		return b, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func (p *bufPool) put(b *pbuf) { p.free <- b }

// outFrame is a frame queued for the writer goroutine.
type outFrame struct {
	t       wire.Type
	flags   uint8
	head    [48]byte
	headN   int
	payload []byte
	// ext and parts, when set, follow head and payload in the body (a
	// BATCH's ranges and their runs); their arrays are kept with o.
	ext   []byte
	parts [][]byte
	buf   *pbuf // released after the write
}

func (o *outFrame) u8(v uint8) { o.head[o.headN] = v; o.headN++ }
func (o *outFrame) u32(v uint32) {
	binary.LittleEndian.PutUint32(o.head[o.headN:], v)
	o.headN += 4
}
func (o *outFrame) u64(v uint64) {
	binary.LittleEndian.PutUint64(o.head[o.headN:], v)
	o.headN += 8
}

// sendq feeds one writer goroutine; it flushes whenever the queue drains.
type sendq struct {
	ch      chan *outFrame
	f       *framer
	blocked atomic.Int64 // nanoseconds producers waited for queue space
	pool    sync.Pool
	body    [][]byte // run's: the parts of the frame it writes
}

func newSendq(f *framer, depth int) *sendq {
	return &sendq{ch: make(chan *outFrame, depth), f: f, pool: sync.Pool{New: func() any { return new(outFrame) }}}
}

func (q *sendq) frame(t wire.Type) *outFrame {
	o := q.pool.Get().(*outFrame)
	*o = outFrame{t: t, ext: o.ext[:0], parts: o.parts[:0]}
	return o
}

// put queues o; ctx ends the wait.
func (q *sendq) put(ctx context.Context, o *outFrame) error {
	select {
	case q.ch <- o:
		return nil
	default:
	}
	start := time.Now()
	defer func() { q.blocked.Add(int64(time.Since(start))) }()
	select {
	case q.ch <- o:
		return nil
	case <-ctx.Done():
		if o.buf != nil {
			o.buf.unref()
		}
		return context.Cause(ctx)
	}
}

// close ends the queue; run returns after writing what is queued.
func (q *sendq) close() { close(q.ch) }

// run writes frames until the queue is closed or ctx ends.
func (q *sendq) run(ctx context.Context) error {
	for {
		var o *outFrame
		var ok bool
		select {
		case o, ok = <-q.ch:
		default:
			if err := q.f.flush(); err != nil {
				return err
			}
			select {
			case o, ok = <-q.ch:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		if !ok {
			return q.f.flush()
		}
		q.body = append(append(q.body[:0], o.head[:o.headN], o.ext, o.payload), o.parts...)
		err := q.f.writeFrame(o.t, o.flags, q.body...)
		clear(q.body)
		if o.buf != nil {
			o.buf.unref()
		}
		q.pool.Put(o)
		if err != nil {
			return err
		}
	}
}

// sendMap sends an encoded map as EXTENTS frames, in pieces of one frame.
// A peer with wire.FeatWideMaps takes a map of any length its session memory
// budget holds (and refuses a larger one, permanently, naming its budget);
// to an older peer a map of more than wire.MaxExtents is refused here, before a
// byte is sent.
func sendMap(f *framer, m sparse.Map) error {
	if n := m.Len(); n > wire.MaxExtents && !f.wideMaps {
		return fmt.Errorf("%w: %d data extents, and one map carries at most %d to this peer (an older sparsesync, "+
			"without wide maps): upgrade the peer, copy it with sparsesync local, "+
			"or write the image less fragmented (for example qemu-img convert) and push that", ErrTooManyExtents, n, wire.MaxExtents)
	}
	b, err := m.MarshalBinary()
	if err != nil {
		return err
	}
	const piece = wire.MaxFrame
	for {
		n := min(len(b), piece)
		var flags uint8
		if n == len(b) {
			flags = wire.FlagLast
		}
		if err := f.writeFrame(wire.Extents, flags, b[:n]); err != nil {
			return err
		}
		b = b[n:]
		if flags != 0 {
			return nil
		}
	}
}

// readMap reads EXTENTS frames into a map of the announced size. The
// first frame's header (version, size, extent count) is checked before
// anything is buffered: the count against wire.MaxExtents (for a peer without
// wire.FeatWideMaps; else against the size) and against the session's memory
// budget (a claim that could never fit is refused; it is
// not reserved), the bytes that follow against what that count can take.
// Memory is reserved as the bytes arrive, for the extents they can encode
// (at least 2 bytes each), and released with the session. Every frame but
// the last must be full, so a map costs its peer at least 64 KiB per
// frame. Map frames are not progress for the idle timeout: a peer that
// trickles its map is cut by it.
func readMap(f *framer, size int64) (sparse.Map, error) {
	var b []byte
	var count, want, hdr, charged int64
	for {
		flags, body, err := f.expect(wire.Extents)
		if err != nil {
			return sparse.Map{}, err
		}
		last := flags&wire.FlagLast != 0
		if !last && len(body) != wire.MaxFrame {
			return sparse.Map{}, fmt.Errorf("%w: EXTENTS frame of %d bytes before the last", ErrProtocol, len(body))
		}
		if b == nil {
			var n int
			if count, n, err = mapHeader(body, size, f.wideMaps); err != nil {
				return sparse.Map{}, err
			}
			hdr = int64(n)
			if err := f.mem.fits(count*extentCost+hdr, fmt.Sprintf("an extent map of %d extents", count)); err != nil {
				return sparse.Map{}, fmt.Errorf("%w (the receiving side's Server.MaxSessionMemory bounds a map's length; "+
					"raise it, or copy the file with sparsesync local)", err)
			}
			want = hdr + 20*count // at most 2 varints of 10 bytes each
		}
		got := int64(len(b) + len(body))
		if got > want {
			return sparse.Map{}, fmt.Errorf("%w: extent map of %d extents longer than %d bytes", ErrProtocol, count, want)
		}
		if need := hdr + min(count, (got-hdr)/2)*extentCost; need > charged {
			if err := f.mem.reserve(need-charged, fmt.Sprintf("an extent map of %d extents", count)); err != nil {
				return sparse.Map{}, err
			}
			charged = need
		}
		b = append(b, body...)
		if last {
			break
		}
	}
	m, err := sparse.DecodeMap(b)
	if err != nil {
		return sparse.Map{}, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	if m.Size() != size {
		return sparse.Map{}, fmt.Errorf("%w: extent map of size %d for a file of %d", ErrProtocol, m.Size(), size)
	}
	return m, nil
}

// mapHeader reads the version, size and extent count at the start of an
// encoded map (sparse's encoding) and checks them before any allocation:
// the count is at most wire.MaxExtents from a peer without wire.FeatWideMaps, and at
// most the size (each extent holds a byte) from one with it.
func mapHeader(b []byte, size int64, wide bool) (count int64, n int, err error) {
	bad := func(why string) (int64, int, error) {
		return 0, 0, fmt.Errorf("%w: extent map: %s", ErrProtocol, why)
	}
	if len(b) < 3 || b[0] != 1 {
		return bad("bad header")
	}
	n = 1
	sz, k := binary.Uvarint(b[n:])
	if k <= 0 {
		return bad("bad size")
	}
	n += k
	if sz != uint64(size) {
		return bad(fmt.Sprintf("size %d for a file of %d", sz, size))
	}
	c, k := binary.Uvarint(b[n:])
	if k <= 0 {
		return bad("bad extent count")
	}
	n += k
	switch {
	case c > wire.MaxExtents && !wide:
		return bad(fmt.Sprintf("%d extents (limit %d without wide maps)", c, wire.MaxExtents))
	case c > uint64(size):
		return bad(fmt.Sprintf("%d extents in %d bytes", c, size))
	}
	return int64(c), n, nil
}
