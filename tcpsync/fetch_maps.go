package tcpsync

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// A fetch with piece maps (wire.FeatPieceMaps in both HELLOs). No whole map
// crosses: after SRCINFO,
//
//	source → client  MANIFEST frames of pieceEntryLen bytes per piece: the
//	                 piece's end hi (u64; it starts where the previous one
//	                 ended, the first at 0, the last ends at the size), its
//	                 data blocks (u32) and the first half of the SHA-256 of
//	                 its map (as a WINDOW body) followed by its data
//	client → source  FETCH(k) with wire.FlagPieceMap
//	source → client  WINDOW(lo, hi, the source's extents in [lo, hi))
//	client → source  FETCH(k, seed, bitmap, hashes) as without piece maps
//	source → client  DATA/ZERO, PIECEEND(k)
//
// A piece is cut by the source as it walks its extents (cutPiece): at most
// pieceBytes of data blocks, and fewer where its map would pass
// windowBudget; it covers the holes after its data up to the next
// piece's first block. So the manifest grows with the data (28 bytes per
// 4 MiB), a piece's map is bounded by a WINDOW frame, and a client holds
// the maps of the pieces it is fetching only. The sum binds a piece's map
// and its data: sources that agree on the manifest agree on both, and a
// source that sends another map or other data for a piece is caught at
// that piece.

const (
	// pieceEntryLen is a manifest line with piece maps: hi, blocks, sum.
	pieceEntryLen = 8 + 4 + pieceSumLen
	// entriesPerFrame bounds the lines in one MANIFEST frame.
	entriesPerFrame = wire.MaxFrame / pieceEntryLen
	// entryCost is what a client charges its budget for a line it holds.
	entryCost = 32
)

// pieceEntry is one line of a manifest with piece maps.
type pieceEntry struct {
	hi     int64
	blocks uint32
	sum    pieceSum
}

func (e pieceEntry) appendTo(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(e.hi))
	b = binary.LittleEndian.AppendUint32(b, e.blocks)
	return append(b, e.sum[:]...)
}

// mapPiece is one piece with its map.
type mapPiece struct {
	lo, hi int64
	src    []sparse.Extent // the source's data extents in [lo, hi)
	ext    []sparse.Extent // its data blocks (src rounded out to the block size)
	n      int64           // bytes in ext
	blocks int64
}

// cutPiece walks the source's extents from lo (a block boundary) and
// returns the piece that starts there: its data blocks up to per of them,
// or fewer once its map's encoding passes windowBudget (at the next block
// boundary). It ends where the next piece's data starts, or at size when
// no data follows.
func cutPiece(ctx context.Context, walk extentWalk, lo, size, bs, per int64) (mapPiece, error) {
	p := mapPiece{lo: lo, hi: size}
	var blockEnd, prev int64 = lo, lo
	var blocks int64
	enc := 0
	closed, more := false, false
	err := walk(ctx, lo, func(e sparse.Extent) error {
		if e.Off < lo {
			e = sparse.Extent{Off: lo, Len: e.End() - lo}
		}
		if closed {
			if e.Off >= p.hi {
				more = true
				return errWindowFull
			}
			e.Len = min(e.Len, p.hi-e.Off)
			p.src = append(p.src, e)
			return nil
		}
		a, b := max(e.Off/bs*bs, blockEnd), min(alignUp(e.End(), bs), size)
		n := blocksIn(max(0, b-a), bs)
		if blocks+n >= per {
			cut := min(b, a+(per-blocks)*bs)
			closed, p.hi, blockEnd = true, cut, cut
			if e.End() > cut {
				e.Len, more = cut-e.Off, true
			}
			p.src = append(p.src, e)
			if more {
				return errWindowFull
			}
			return nil
		}
		blocks += n
		blockEnd = max(blockEnd, b)
		p.src = append(p.src, e)
		enc += wire.UvarintLen(uint64(e.Off-prev)) + wire.UvarintLen(uint64(e.Len))
		prev = e.End()
		if enc >= windowBudget {
			closed, p.hi = true, blockEnd
		}
		return nil
	})
	if err != nil && !errors.Is(err, errWindowFull) {
		return p, err
	}
	if !more {
		p.hi = size // no data after it: the piece takes the holes to the end
	}
	if wire.WindowMapLen(p.src, p.hi) > wire.MaxWindowMap {
		return p, fmt.Errorf("%w: more data extents in the block of %d bytes before %d than one piece's map carries "+
			"(%d bytes of map): sync with a smaller block size", ErrTooManyExtents, bs, p.hi, wire.MaxWindowMap)
	}
	m, err := sparse.FromExtents(p.hi, p.src)
	if err != nil {
		return p, fmt.Errorf("%w: %w", ErrSourceChanged, err)
	}
	p.ext = m.RoundOut(bs).Extents()
	for _, e := range p.ext {
		p.n += e.Len
		p.blocks += blocksIn(e.Len, bs)
	}
	return p, nil
}

// sumMapPiece is a piece's sum with piece maps: over its map, as a WINDOW
// body, then its data.
func sumMapPiece(lo, hi int64, src []sparse.Extent, data []byte) (pieceSum, error) {
	enc, err := wire.WindowFrame(lo, hi, src)
	if err != nil {
		return pieceSum{}, err
	}
	h := sha256.New()
	h.Write(enc)
	h.Write(data)
	return pieceSum(h.Sum(nil)[:pieceSumLen]), nil
}

// pieceCutter cuts the source's pieces again as FETCHes ask for them,
// keeping the last few (a piece is asked for twice: its map, its blocks).
type pieceCutter struct {
	walk     extentWalk
	size, bs int64
	his      []int64 // each piece's end, from the manifest
	recent   [fetchDepth + 2]*mapPiece
	next     int
}

func (c *pieceCutter) piece(ctx context.Context, k uint32) (*mapPiece, error) {
	if int64(k) >= int64(len(c.his)) {
		return nil, fmt.Errorf("%w: FETCH of piece %d of %d", ErrProtocol, k, len(c.his))
	}
	lo := int64(0)
	if k > 0 {
		lo = c.his[k-1]
	}
	for _, p := range c.recent {
		if p != nil && p.lo == lo {
			return p, nil
		}
	}
	p, err := cutPiece(ctx, c.walk, lo, c.size, c.bs, max(1, pieceBytes/c.bs))
	if err != nil {
		return nil, err
	}
	if p.hi != c.his[k] {
		return nil, fmt.Errorf("%w: piece %d now ends at %d, its manifest said %d", ErrSourceChanged, k, p.hi, c.his[k])
	}
	c.recent[c.next%len(c.recent)] = &p
	c.next++
	return &p, nil
}

// serveFetchMaps is serveFetch with piece maps, once SRCINFO is sent.
func (s *Server) serveFetchMaps(ctx context.Context, f *framer, src *FileSource, ident string, bs uint32, st *Stats) error {
	if err := f.mem.reserve(windowMemory, "the piece maps"); err != nil {
		return err
	}
	walk, err := sourceWalk(ctx, src)
	if err != nil {
		return err
	}
	c := &pieceCutter{walk: walk, size: src.Size(), bs: int64(bs)}
	pr := newPieceReader(max(1, pieceBytes/c.bs)*c.bs, sourceShort)
	key := fmt.Sprintf("maps:%s:%d:%d", ident, bs, c.size)
	lines := s.manifests.get(key)
	if lines == nil {
		if lines, err = s.sendMapManifest(ctx, f, src, c, pr); err != nil {
			return err
		}
		if len(lines) <= manifestCacheBytes {
			s.manifests.put(key, lines)
		}
	} else if err := sendEntries(f, lines); err != nil {
		return err
	}
	for b := lines; len(b) > 0; b = b[pieceEntryLen:] {
		c.his = append(c.his, int64(binary.LittleEndian.Uint64(b)))
		st.DataBytes += int64(binary.LittleEndian.Uint32(b[8:])) * c.bs
	}
	return s.answerFetches(ctx, f, src, c.bs, pr, st, func(k uint32, flags uint8) ([]sparse.Extent, int64, int, error) {
		p, err := c.piece(ctx, k)
		if err != nil {
			return nil, 0, 0, err
		}
		if flags&wire.FlagPieceMap == 0 {
			return p.ext, p.n, int(p.blocks), nil
		}
		b, err := wire.WindowFrame(p.lo, p.hi, p.src)
		if err != nil {
			return nil, 0, 0, err
		}
		if h := s.fetchHooks; h != nil && h.pieceMap != nil {
			b = h.pieceMap(int(k), b)
		}
		return nil, 0, 0, f.send(wire.Window, 0, b)
	})
}

// sendEntries sends cached manifest lines.
func sendEntries(f *framer, lines []byte) error {
	const most = entriesPerFrame * pieceEntryLen
	for len(lines) > most {
		if err := f.send(wire.Manifest, 0, lines[:most]); err != nil {
			return err
		}
		lines = lines[most:]
	}
	return f.send(wire.Manifest, wire.FlagLast, lines)
}

// sendMapManifest cuts the source into pieces, reads each once and sends
// its line, a frame at least every second. It returns the lines (for the
// cache, and the pieces' ends: 28 bytes per piece, held while serving).
func (s *Server) sendMapManifest(ctx context.Context, f *framer, src *FileSource, c *pieceCutter, pr *pieceReader) ([]byte, error) {
	var out, all []byte
	last := time.Now()
	per := max(1, pieceBytes/c.bs)
	for lo, k := int64(0), 0; lo < c.size; k++ {
		p, err := cutPiece(ctx, c.walk, lo, c.size, c.bs, per)
		if err != nil {
			return nil, err
		}
		buf, err := pr.read(ctx, cachedReads{src}, p.ext, p.n, f.m.read)
		if err != nil {
			return nil, err
		}
		if h := s.fetchHooks; h != nil && h.piece != nil {
			h.piece(ctx, -1-k, buf)
		}
		sum, err := sumMapPiece(p.lo, p.hi, p.src, buf)
		if err != nil {
			return nil, err
		}
		line := pieceEntry{hi: p.hi, blocks: uint32(p.blocks), sum: sum}
		out = line.appendTo(out)
		all = line.appendTo(all)
		f.progress(p.n)
		if len(out) == entriesPerFrame*pieceEntryLen || time.Since(last) > time.Second {
			if err := f.send(wire.Manifest, 0, out); err != nil {
				return nil, err
			}
			out, last = out[:0], time.Now()
		}
		lo = p.hi
	}
	if err := src.changed(); err != nil {
		return nil, err
	}
	return all, f.send(wire.Manifest, wire.FlagLast, out)
}
