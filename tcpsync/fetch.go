package tcpsync

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"
	"sort"
	"sync"
	"time"

	"github.com/sparsesync/sparsesync/internal/blockhash"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// The fetch operation serves one file to a multi-source client (PullMulti,
// multi.go). Between current peers it runs with piece maps (fetch_maps.go);
// with an older peer, after OPEN(opFetch):
//
//	source → client  SRCINFO (size, block size, identity) + EXTENTS
//	source → client  MANIFEST frames: 16 bytes per piece, the first half of
//	                 the SHA-256 of the piece's data (wire.FlagLast ends them)
//	client → source  FETCH(k, seed, bitmap of the blocks it holds, their
//	                 seeded xxhash64s)
//	source → client  DATA/ZERO for the piece's blocks the client lacks or
//	                 holds differently, then PIECEEND(k)
//	client → source  DONE          source → client  DONEACK
//
// A piece is up to pieceBytes of consecutive source-data blocks. The
// manifest is content only (no seed, no session key): sources serving
// the same version give the same manifest, so a client compares them
// across sessions before any data moves. SHA-256 and not a seeded
// xxhash: the client tells every source its seed, and a source must not
// be able to craft a piece that passes for another.
const opFetch = 4

const (
	// pieceBytes is the data in one piece: the unit of work handed to a
	// source and of verification; a client holds at most fetchDepth per
	// source in memory.
	pieceBytes = 4 << 20
	// pieceSumLen is the bytes of a piece's SHA-256 kept in the manifest.
	pieceSumLen = 16
	// manifestPerFrame bounds the entries in one MANIFEST frame.
	manifestPerFrame = 4096
)

type pieceSum [pieceSumLen]byte

// fetchPieces cuts a source's data blocks into pieces of at most pieceBytes,
// computed on demand like plan's chunks: memory is bounded by the map's
// extents, never by a claimed size.
type fetchPieces struct {
	size, bs int64
	ext      []sparse.Extent // the source's data blocks (RoundOut(bs)), the last clipped to size
	cum      []int64         // cum[i]: data blocks before ext[i]
	nblocks  int64
	per      int64 // blocks per piece
	n        int
}

func newFetchPieces(src sparse.Map, bs int64) *fetchPieces {
	p := &fetchPieces{size: src.Size(), bs: bs, ext: src.RoundOut(bs).Extents(), per: max(1, pieceBytes/bs)}
	p.cum = make([]int64, len(p.ext))
	for i, e := range p.ext {
		p.cum[i] = p.nblocks
		p.nblocks += blocksIn(e.Len, bs)
	}
	p.n = int((p.nblocks + p.per - 1) / p.per)
	return p
}

// piece returns the extents of piece k (0 <= k < n) and their total length.
func (p *fetchPieces) piece(k int) ([]sparse.Extent, int64) {
	first := int64(k) * p.per
	left := min(p.per, p.nblocks-first)
	i := sort.Search(len(p.cum), func(i int) bool { return p.cum[i] > first }) - 1
	off := p.ext[i].Off + (first-p.cum[i])*p.bs
	var out []sparse.Extent
	var total int64
	for ; left > 0 && i < len(p.ext); i++ {
		e := p.ext[i]
		off = max(off, e.Off)
		take := min(e.End()-off, left*p.bs)
		out = append(out, sparse.Extent{Off: off, Len: take})
		total += take
		left -= blocksIn(take, p.bs)
	}
	return out, total
}

// blocks calls fn for each block of the piece's extents with its offset
// in the file and in the piece's buffer.
func (p *fetchPieces) blocks(ext []sparse.Extent, fn func(i int, off, at, n int64) error) error {
	return eachBlock(ext, p.bs, fn)
}

// eachBlock calls fn for each block of bs bytes (the last of an extent
// shorter) of ext, with its offset in the file and in a buffer holding ext.
func eachBlock(ext []sparse.Extent, bs int64, fn func(i int, off, at, n int64) error) error {
	var at int64
	i := 0
	for _, e := range ext {
		for o := e.Off; o < e.End(); o += bs {
			n := min(bs, e.End()-o)
			if err := fn(i, o, at, n); err != nil {
				return err
			}
			at += n
			i++
		}
	}
	return nil
}

func sumPiece(b []byte) pieceSum {
	h := sha256.Sum256(b)
	return pieceSum(h[:pieceSumLen])
}

// fetchHooks let tests make a source misbehave.
type fetchHooks struct {
	// piece, if set, is called with each piece's bytes before they are
	// compared and sent (it may change them, or block).
	piece func(ctx context.Context, k int, b []byte)
	// pieceMap, if set, may replace the WINDOW body of piece k's map
	// (fetch_maps.go).
	pieceMap func(k int, body []byte) []byte
}

// serveFetch serves name to a multi-source client.
func (s *Server) serveFetch(ctx context.Context, f *framer, name string, bs uint32) (Stats, error) {
	var st Stats
	if !validBlockSize(bs) {
		return st, fmt.Errorf("%w: block size %d", ErrProtocol, bs)
	}
	src, file, err := s.openForRead(ctx, name)
	if err != nil {
		return st, err
	}
	defer file.Close()
	if err := f.send(wire.Opened, 0); err != nil {
		return st, err
	}
	if err := src.refresh(ctx); err != nil {
		return st, err
	}
	size := src.Size()
	ident := src.Identity()
	if len(ident) > wire.MaxIdentity {
		ident = ident[:wire.MaxIdentity]
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(size))
	b = binary.LittleEndian.AppendUint32(b, bs)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = wire.AppendBytes(b, []byte(ident))
	if err := f.writeFrame(wire.SrcInfo, 0, b); err != nil {
		return st, err
	}
	st.Size = size
	if f.pieceMaps {
		err := s.serveFetchMaps(ctx, f, src, ident, bs, &st)
		return st, err
	}
	m, err := src.Extents(ctx)
	if err != nil {
		return st, err
	}
	if m.Size() != size {
		return st, fmt.Errorf("%w: extent map of size %d for a source of %d", ErrSourceChanged, m.Size(), size)
	}
	if err := sendMap(f, m); err != nil {
		return st, err
	}
	if err := f.flush(); err != nil {
		return st, err
	}
	ps := newFetchPieces(m, int64(bs))
	st.DataBytes = m.RoundOut(int64(bs)).Bytes()
	pr := newPieceReader(ps.per*ps.bs, sourceShort)
	enc, err := m.MarshalBinary()
	if err != nil {
		return st, err
	}
	mapSum := sha256.Sum256(enc)
	key := fmt.Sprintf("%s:%d:%x", ident, bs, mapSum)
	if cached := s.manifests.get(key); cached != nil {
		for len(cached) > manifestPerFrame*pieceSumLen {
			if err := f.send(wire.Manifest, 0, cached[:manifestPerFrame*pieceSumLen]); err != nil {
				return st, err
			}
			cached = cached[manifestPerFrame*pieceSumLen:]
		}
		if err := f.send(wire.Manifest, wire.FlagLast, cached); err != nil {
			return st, err
		}
	} else {
		sums, err := s.sendManifest(ctx, f, src, ps, pr)
		if err != nil {
			return st, err
		}
		s.manifests.put(key, sums)
	}
	err = s.answerFetches(ctx, f, src, ps.bs, pr, &st, func(k uint32, _ uint8) ([]sparse.Extent, int64, int, error) {
		if int64(k) >= int64(ps.n) {
			return nil, 0, 0, fmt.Errorf("%w: FETCH of piece %d of %d", ErrProtocol, k, ps.n)
		}
		ext, n := ps.piece(int(k))
		return ext, n, int(min(ps.per, ps.nblocks-int64(k)*ps.per)), nil
	})
	return st, err
}

// answerFetches answers FETCH frames until DONE. piece gives the piece
// asked for (its blocks, their bytes, their count), or with piece maps
// sends its map (ext nil) when flags ask for that.
func (s *Server) answerFetches(ctx context.Context, f *framer, src *FileSource, bs int64, pr *pieceReader, st *Stats,
	piece func(k uint32, flags uint8) ([]sparse.Extent, int64, int, error)) error {
	for {
		t, flags, body, err := f.readFrame()
		if err != nil {
			return err
		}
		switch t {
		case wire.Fetch:
			if err := s.servePiece(ctx, f, src, bs, pr, body, flags, st, piece); err != nil {
				return err
			}
		case wire.Done:
			if len(body) != 0 {
				return fmt.Errorf("%w: DONE of %d bytes in a fetch", ErrProtocol, len(body))
			}
			st.Verified = true
			return f.send(wire.DoneAck, 0)
		case wire.Error:
			return decodeError(body)
		default:
			return fmt.Errorf("%w: %s in a fetch", ErrProtocol, t)
		}
	}
}

// sendManifest reads the source's data once and sends the piece sums, a
// frame at least every second (the client's idle timeout runs meanwhile).
// It returns them all, for the cache.
func (s *Server) sendManifest(ctx context.Context, f *framer, src *FileSource, ps *fetchPieces, pr *pieceReader) ([]byte, error) {
	var out, all []byte
	last := time.Now()
	for k := range ps.n {
		ext, n := ps.piece(k)
		buf, err := pr.read(ctx, cachedReads{src}, ext, n, f.m.read)
		if err != nil {
			return nil, err
		}
		if h := s.fetchHooks; h != nil && h.piece != nil {
			h.piece(ctx, -1-k, buf)
		}
		sum := sumPiece(buf)
		out = append(out, sum[:]...)
		if len(all) < manifestCacheBytes {
			all = append(all, sum[:]...)
		}
		f.progress(n)
		if len(out) == manifestPerFrame*pieceSumLen || time.Since(last) > time.Second {
			if err := f.send(wire.Manifest, 0, out); err != nil {
				return nil, err
			}
			out, last = out[:0], time.Now()
		}
	}
	if err := src.changed(); err != nil {
		return nil, err
	}
	if len(all) != ps.n*pieceSumLen {
		all = nil // larger than the whole cache
	}
	return all, f.send(wire.Manifest, wire.FlagLast, out)
}

// manifestCacheBytes bounds a server's cached manifests (16 bytes per 4 MiB
// of data: 16 MiB holds those of 4 TiB).
const manifestCacheBytes = 16 << 20

// manifestCache keeps the manifests a server computed, keyed by the file's
// identity (device, inode, size, mtime, ctime), the block size and its
// data map: a second fetch of the same version reads nothing before data
// moves. A stale entry (a file changed behind its ctime) costs nothing in
// correctness: the client checks every piece against the agreed manifest,
// and a source whose data differs from its own is excluded at that piece.
type manifestCache struct {
	mu    sync.Mutex
	m     map[string][]byte
	order []string // oldest first
	bytes int
}

func (c *manifestCache) get(key string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

func (c *manifestCache) put(key string, sums []byte) {
	if sums == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string][]byte{}
	}
	if _, ok := c.m[key]; ok {
		return
	}
	for c.bytes+len(sums) > manifestCacheBytes && len(c.order) > 0 {
		c.bytes -= len(c.m[c.order[0]])
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[key] = sums
	c.order = append(c.order, key)
	c.bytes += len(sums)
}

// servePiece answers one FETCH: the piece's blocks the client lacks or
// holds differently, as DATA (runs of up to wire.MaxDataPayload) and ZERO, then
// PIECEEND.
func (s *Server) servePiece(ctx context.Context, f *framer, src *FileSource, bs int64, pr *pieceReader, body []byte, flags uint8, st *Stats,
	piece func(k uint32, flags uint8) ([]sparse.Extent, int64, int, error)) error {
	d := wire.Dec{B: body, T: wire.Fetch}
	k := d.U32()
	if flags&wire.FlagPieceMap != 0 {
		if err := d.End(); err != nil {
			return err
		}
		_, _, _, err := piece(k, flags)
		return err
	}
	seed, nbits := d.U64(), d.U32()
	if d.Err != nil {
		return d.Err
	}
	ext, n, nblocks, err := piece(k, flags)
	if err != nil {
		return err
	}
	var bitmap []byte
	if nbits != 0 {
		if int(nbits) != nblocks {
			return fmt.Errorf("%w: FETCH of piece %d with %d blocks, it has %d", ErrProtocol, k, nbits, nblocks)
		}
		if bitmap = d.Take((nblocks + 7) / 8); d.Err != nil {
			return d.Err
		}
	}
	held := 0
	for _, c := range bitmap {
		held += bits.OnesCount8(c)
	}
	if len(d.B) != 8*held {
		return fmt.Errorf("%w: FETCH of piece %d with %d hash bytes for %d blocks held", ErrProtocol, k, len(d.B), held)
	}
	theirs := d.B
	buf, err := pr.read(ctx, src, ext, n, f.m.read)
	if err != nil {
		return err
	}
	if h := s.fetchHooks; h != nil && h.piece != nil {
		h.piece(ctx, int(k), buf)
	}
	h := blockhash.New(seed)
	// run is a pending DATA run: consecutive changed blocks.
	var runOff, runAt, runLen int64
	flush := func() error {
		if runLen == 0 {
			return nil
		}
		hdr := binary.LittleEndian.AppendUint64(nil, uint64(runOff))
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(runLen))
		if err := f.writeFrame(wire.Data, 0, hdr, buf[runAt:runAt+runLen]); err != nil {
			return err
		}
		st.CopiedBytes += runLen
		f.progress(runLen)
		runLen = 0
		return nil
	}
	j := 0
	err = eachBlock(ext, bs, func(i int, off, at, bn int64) error {
		b := buf[at : at+bn]
		if bitmap != nil && bitmap[i/8]&(1<<(i%8)) != 0 {
			want := binary.LittleEndian.Uint64(theirs[8*j:])
			j++
			if h.Sum(b) == want {
				st.UnchangedBytes += bn
				f.progress(bn)
				return flush()
			}
		}
		if sparse.IsZero(b) {
			if err := flush(); err != nil {
				return err
			}
			z := binary.LittleEndian.AppendUint64(nil, uint64(off))
			z = binary.LittleEndian.AppendUint64(z, uint64(bn))
			st.ZeroBytes += bn
			f.progress(bn)
			return f.writeFrame(wire.Zero, 0, z)
		}
		if runLen > 0 && (runOff+runLen != off || runLen+bn > wire.MaxDataPayload) {
			if err := flush(); err != nil {
				return err
			}
		}
		if runLen == 0 {
			runOff, runAt = off, at
		}
		runLen += bn
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return err
	}
	return f.send(wire.PieceEnd, 0, binary.LittleEndian.AppendUint32(nil, k))
}
