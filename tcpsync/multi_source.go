package tcpsync

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// runSource is one source's session: its statement, then pieces until
// none is left or it fails.
func (m *multi) runSource(ctx context.Context, i int) {
	src := m.sources[i]
	c := m.c
	c.Progress = nil
	if src.Token != nil {
		c.Token = src.Token
	}
	if src.Dial != nil {
		c.Dial = src.Dial
	}
	stated, took := false, false
	st, _, err := attemptOnce(ctx, src.Addr, &c, func(ctx context.Context, c *Options, f *framer, _ uint64) (Stats, error) {
		h, err := m.readHead(ctx, f, src.Remote)
		stated = true
		m.heads <- headMsg{i: i, head: h, err: err}
		if err != nil {
			return Stats{}, err
		}
		f.wd.hold(1)
		select {
		case <-m.start:
		case <-ctx.Done():
		}
		f.wd.hold(-1)
		if ctx.Err() != nil {
			return Stats{}, context.Cause(ctx)
		}
		if !m.ready || !m.chosen[i] {
			// Dropped, or the pull failed: end the session politely.
			_ = f.send(wire.Done, 0)
			return Stats{}, nil
		}
		took = true
		return Stats{}, m.work(ctx, i, f)
	})
	if !stated {
		m.heads <- headMsg{i: i, err: err}
	}
	m.mu.Lock()
	m.st.Sources[i].WireBytes = st.WireBytesSent + st.WireBytesReceived
	m.st.WireBytesSent += st.WireBytesSent
	m.st.WireBytesReceived += st.WireBytesReceived
	m.st.Throttled += st.Throttled
	m.mu.Unlock()
	if m.c.Progress != nil {
		m.c.Progress.Wire.Add(st.WireBytesSent + st.WireBytesReceived)
	}
	if !took {
		return
	}
	if err != nil && m.failErr.Load() == nil {
		why := "failed: " + sanitize(err.Error())
		if errors.Is(err, ErrPieceMismatch) {
			why = "sent wrong data: " + sanitize(err.Error())
		} else if errors.Is(err, ErrStalled) || errors.Is(err, errIdle) {
			why = "stalled: " + sanitize(err.Error())
		}
		m.drop(i, why, err)
	}
	m.queue.leave()
}

// errIdle stands for a read deadline that passed (net's timeout error).
var errIdle = errors.New("tcpsync: no data for the idle timeout")

// readHead opens the fetch and reads the source's statement.
func (m *multi) readHead(ctx context.Context, f *framer, remote string) (*fetchHead, error) {
	if err := f.send(wire.Open, 0, openBody(opFetch, 0, uint32(m.c.BlockSize), remote)); err != nil {
		return nil, err
	}
	if _, _, err := f.expect(wire.Opened); err != nil {
		return nil, err
	}
	_, body, err := f.expect(wire.SrcInfo)
	if err != nil {
		return nil, err
	}
	d := wire.Dec{B: body, T: wire.SrcInfo}
	size, bs, _ := d.U64(), d.U32(), d.U32()
	_ = d.Bytes(wire.MaxIdentity)
	if err := d.End(); err != nil {
		return nil, err
	}
	if size > wire.MaxSize {
		return nil, fmt.Errorf("%w: source size %d over the limit %d", ErrProtocol, size, int64(wire.MaxSize))
	}
	if int(bs) != m.c.BlockSize {
		return nil, fmt.Errorf("%w: block size %d, asked for %d", ErrProtocol, bs, m.c.BlockSize)
	}
	if f.pieceMaps {
		h := &fetchHead{size: int64(size), bs: int64(bs)}
		if err := readPieceManifest(f, h); err != nil {
			return nil, err
		}
		return h, nil
	}
	sm, err := readMap(f, int64(size))
	if err != nil {
		return nil, err
	}
	h := &fetchHead{size: int64(size), bs: int64(bs), m: sm}
	ps := newFetchPieces(sm, h.bs)
	for {
		flags, body, err := f.expect(wire.Manifest)
		if err != nil {
			return nil, err
		}
		if len(body)%pieceSumLen != 0 || len(h.manifest)+len(body)/pieceSumLen > ps.n {
			return nil, fmt.Errorf("%w: MANIFEST of %d bytes for %d pieces", ErrProtocol, len(body), ps.n)
		}
		// The manifest is held whole: charged to the session's memory
		// budget as it arrives, so a source cannot make it grow past that.
		if err := f.mem.reserve(int64(len(body)), "the manifest"); err != nil {
			return nil, err
		}
		for b := body; len(b) > 0; b = b[pieceSumLen:] {
			_, n := ps.piece(len(h.manifest))
			f.progress(n)
			h.manifest = append(h.manifest, pieceSum(b[:pieceSumLen]))
		}
		if flags&wire.FlagLast != 0 {
			break
		}
	}
	if len(h.manifest) != ps.n {
		return nil, fmt.Errorf("%w: MANIFEST of %d pieces, the map has %d", ErrProtocol, len(h.manifest), ps.n)
	}
	id := sha256.New()
	id.Write(binary.LittleEndian.AppendUint64(nil, uint64(h.size)))
	id.Write(binary.LittleEndian.AppendUint64(nil, uint64(h.bs)))
	enc, err := sm.MarshalBinary()
	if err != nil {
		return nil, err
	}
	id.Write(enc)
	for _, s := range h.manifest {
		id.Write(s[:])
	}
	copy(h.id[:], id.Sum(nil))
	return h, nil
}
