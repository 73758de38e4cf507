package tcpsync

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/sparsesync/sparsesync/internal/blockhash"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// The client's side of a fetch with piece maps (fetch_maps.go): the
// statement is the manifest alone, a piece's map comes when it is fetched,
// and the target is walked, punched and seeded a piece at a time. What the
// pull holds grows with the data (a manifest line per piece), never with
// the extent count of the source or of the target.

// readPieceManifest reads the MANIFEST lines of a source with piece maps
// into h: the pieces must tile [0, size) in order, each within a piece's
// bounds. They are charged to the session's budget as they arrive.
func readPieceManifest(f *framer, h *fetchHead) error {
	per := max(1, pieceBytes/h.bs)
	var lo int64
	id := sha256.New()
	id.Write(binary.LittleEndian.AppendUint64(nil, uint64(h.size)))
	id.Write(binary.LittleEndian.AppendUint64(nil, uint64(h.bs)))
	id.Write([]byte("piece maps"))
	for {
		flags, body, err := f.expect(wire.Manifest)
		if err != nil {
			return err
		}
		if len(body)%pieceEntryLen != 0 {
			return fmt.Errorf("%w: MANIFEST of %d bytes", ErrProtocol, len(body))
		}
		if err := f.mem.reserve(int64(len(body)/pieceEntryLen)*entryCost, "the manifest"); err != nil {
			return err
		}
		id.Write(body)
		for b := body; len(b) > 0; b = b[pieceEntryLen:] {
			e := pieceEntry{hi: int64(binary.LittleEndian.Uint64(b)), blocks: binary.LittleEndian.Uint32(b[8:])}
			copy(e.sum[:], b[12:pieceEntryLen])
			if e.hi <= lo || e.hi > h.size || (e.hi%h.bs != 0 && e.hi != h.size) ||
				int64(e.blocks) > min(per, blocksIn(e.hi-lo, h.bs)) {
				return fmt.Errorf("%w: MANIFEST piece [%d,%d) of %d blocks (a piece holds at most %d, the file ends at %d)",
					ErrProtocol, lo, e.hi, e.blocks, per, h.size)
			}
			f.progress(int64(e.blocks) * h.bs)
			h.pieces = append(h.pieces, e)
			lo = e.hi
		}
		if flags&wire.FlagLast != 0 {
			break
		}
	}
	if lo != h.size {
		return fmt.Errorf("%w: MANIFEST pieces end at %d, the file at %d", ErrProtocol, lo, h.size)
	}
	h.maps = true
	copy(h.id[:], id.Sum(nil))
	return nil
}

// oneForm keeps the statements of one form: with piece maps (current
// peers) or whole maps (older ones) cannot be compared, so the sources of
// the other form are dropped (and heads[i] set to nil): the anchor's form,
// else the more common one, piece maps on a tie.
func (m *multi) oneForm(heads []*fetchHead) {
	maps, whole := 0, 0
	anchor := -1
	for i, h := range heads {
		switch {
		case h == nil:
			continue
		case h.maps:
			maps++
		default:
			whole++
		}
		if m.sources[i].Anchor && anchor < 0 {
			anchor = i
		}
	}
	if maps == 0 || whole == 0 {
		return
	}
	keep := maps >= whole
	if anchor >= 0 {
		keep = heads[anchor].maps
	}
	for i, h := range heads {
		if h != nil && h.maps != keep {
			m.drop(i, "speaks another version of the fetch than the others (an older or newer sparsesync): upgrade it", ErrSourcesDisagree)
			heads[i] = nil
		}
	}
}

// dataBytes is the source's data in whole blocks (the last cut at the
// size), as its statement gives it.
func (h *fetchHead) dataBytes() int64 {
	if !h.maps {
		return h.m.RoundOut(h.bs).Bytes()
	}
	var n int64
	for _, p := range h.pieces {
		n += int64(p.blocks) * h.bs
	}
	return min(n, h.size)
}

// shapeMaps is shape with piece maps: the target marked incomplete and
// sized; its data is punched over the source's holes piece by piece
// (clearPiece).
func (m *multi) shapeMaps(ctx context.Context) error {
	t := m.t
	if t.final != nil {
		w, err := sparse.NewWalker(t.final)
		if err != nil {
			return err
		}
		m.dstSize = w.Size()
		if _, m.mayHide, err = w.Tally(ctx); err != nil {
			return err
		}
	}
	empty, _ := sparse.NewMap(m.dstSize)
	if err := t.seedTemp(ctx, empty, nil); err != nil { // the temporary file's size; pieces seed their ranges
		return err
	}
	size := m.agreed.size
	if err := m.markIncomplete(); err != nil {
		return err
	}
	if m.dstSize != size || t.final == nil {
		if err := t.w.SetSize(size); err != nil {
			return fmt.Errorf("truncating %s: %w", t.display, err)
		}
	}
	if t.final != nil {
		w, err := sparse.NewWalker(t.final)
		if err != nil {
			return err
		}
		m.dstWalk = w
	}
	if m.c.ReadBack.on(m.c.Atomic) {
		s, err := newPieceSpill(filepath.Dir(m.dst), m.agreed.npieces())
		if err != nil {
			return err
		}
		m.spill = s
	}
	return nil
}

// onPieceMap takes the WINDOW that answers the oldest pending piece whose
// map was asked for: the map must lie in the piece's range and hold the
// blocks its manifest line says. The piece's blocks are then asked for.
func (m *multi) onPieceMap(ctx context.Context, f *framer, h *blockhash.Hasher, pending []*want, body []byte) error {
	if !m.agreed.maps {
		return fmt.Errorf("%w: WINDOW in a fetch without piece maps", ErrProtocol)
	}
	var w *want
	for _, p := range pending {
		if !p.mapped {
			w = p
			break
		}
	}
	if w == nil {
		return fmt.Errorf("%w: WINDOW of a piece not asked for", ErrProtocol)
	}
	hi, src, err := wire.ParseWindow(body, w.lo, w.hi, m.agreed.bs)
	if err != nil {
		return err
	}
	if hi != w.hi {
		return fmt.Errorf("%w: map of piece %d ends at %d, its manifest line at %d", ErrProtocol, w.k, hi, w.hi)
	}
	sm, err := sparse.FromExtents(hi, src)
	if err != nil {
		return fmt.Errorf("%w: map of piece %d: %w", ErrProtocol, w.k, err)
	}
	ext := sm.RoundOut(m.agreed.bs).Extents()
	var n, blocks int64
	for _, e := range ext {
		n += e.Len
		blocks += blocksIn(e.Len, m.agreed.bs)
	}
	if blocks != int64(m.agreed.pieces[w.k].blocks) { // at most a piece's: the manifest's lines were checked
		return fmt.Errorf("%w: map of piece %d holds %d blocks, its manifest line %d", ErrProtocol, w.k, blocks, m.agreed.pieces[w.k].blocks)
	}
	w.src, w.ext, w.n, w.buf, w.mapped = src, ext, n, w.buf[:n], true
	return m.request(ctx, f, h, w)
}

// walkDst walks the target from off on (see sparse.Walker.WalkFrom), one
// source's goroutine at a time.
func (m *multi) walkDst(ctx context.Context, off int64, fn func(sparse.Extent) error) error {
	m.dstWalkMu.Lock()
	defer m.dstWalkMu.Unlock()
	return m.dstWalk.WalkFrom(ctx, off, fn)
}

// markHeldWalk sets w.held from a walk of the target over the piece's
// blocks.
func (m *multi) markHeldWalk(ctx context.Context, w *want) error {
	if m.dstWalk == nil || len(w.ext) == 0 {
		return nil
	}
	var offs []int64
	_ = eachBlock(w.ext, m.agreed.bs, func(_ int, off, _, _ int64) error { offs = append(offs, off); return nil })
	end := w.ext[len(w.ext)-1].End()
	err := m.walkDst(ctx, w.ext[0].Off, func(e sparse.Extent) error {
		if e.Off >= end {
			return errWindowFull
		}
		b := sort.Search(len(offs), func(b int) bool { return offs[b]+m.agreed.bs > e.Off })
		for ; b < len(offs) && offs[b] < e.End(); b++ {
			w.held[b] = true
		}
		return nil
	})
	if err != nil && err != errWindowFull {
		return fmt.Errorf("walking %s: %w", m.t.display, err)
	}
	return nil
}

// pieceOK checks the assembled piece against its manifest line.
func (m *multi) pieceOK(w *want) bool {
	if !m.agreed.maps {
		return sumPiece(w.buf) == m.agreed.manifest[w.k]
	}
	s, err := sumMapPiece(w.lo, w.hi, w.src, w.buf)
	return err == nil && s == m.agreed.pieces[w.k].sum
}

// clearPiece prepares the target's range of a verified piece, a window of
// its own extents at a time: an atomic temporary file seeded with the
// target's data there, and the target's data (and hidden preallocations)
// punched over the source's holes, as a windowed push's receiver does.
func (m *multi) clearPiece(ctx context.Context, f *framer, w *want) error {
	bs := m.agreed.bs
	for lo := w.lo; lo < w.hi && m.dstWalk != nil && lo < m.dstSize; {
		end := min(w.hi, m.dstSize)
		dst, h, err := collectWindow(ctx, m.walkDst, lo, end, bs)
		if err != nil {
			return fmt.Errorf("walking %s: %w", m.t.display, err)
		}
		hi := w.hi
		if h < end {
			hi = h
		}
		if dst, hi, err = fitWindow(dst, lo, hi, bs); err != nil {
			return err
		}
		var hidden sparse.Map
		if m.mayHide {
			data, err := sparse.FromExtents(min(hi, m.dstSize), dst)
			if err != nil {
				return err
			}
			if hidden, err = sparse.HiddenAllocationIn(ctx, m.t.final, data, lo); err != nil {
				return err
			}
		}
		p, err := windowPlan(clipRange(w.src, lo, hi), dst, hidden, m.dstSize, lo, hi, bs)
		if err != nil {
			return err
		}
		if err := m.t.seedExtents(ctx, dst, f.m); err != nil {
			return err
		}
		for _, e := range p.punch.Extents() {
			if _, err := m.t.w.Zero(e.Off, e.Len); err != nil {
				return fmt.Errorf("punching %s: %w", m.t.display, err)
			}
			m.punchedN.Add(e.Len)
		}
		lo = hi
	}
	return nil
}

// clipRange keeps the parts of ext (sorted) within [lo, hi).
func clipRange(ext []sparse.Extent, lo, hi int64) []sparse.Extent {
	i := sort.Search(len(ext), func(i int) bool { return ext[i].End() > lo })
	out := clipExtents(ext[i:], hi)
	if len(out) > 0 && out[0].Off < lo {
		out = append([]sparse.Extent{{Off: lo, Len: out[0].End() - lo}}, out[1:]...)
	}
	return out
}

// readBackMaps is the read-back with piece maps: each piece's blocks read
// from the stored target and checked against its manifest line, with the
// map kept when it was written, and the target's data in the piece's range
// checked to lie within the source's (in whole pages).
func (m *multi) readBackMaps(ctx context.Context) error {
	f := m.t.final
	w, err := sparse.NewWalker(f)
	if err != nil {
		return err
	}
	rd, err := newUncachedReader(f)
	if err != nil {
		return fmt.Errorf("reading %s back: %w", m.t.display, err)
	}
	defer rd.close()
	pr := newPieceReader(max(1, pieceBytes/m.agreed.bs)*m.agreed.bs, shortRead{m.t.display, ErrVerify})
	for k := range m.agreed.pieces {
		p := &want{k: k, hi: m.agreed.pieces[k].hi}
		if k > 0 {
			p.lo = m.agreed.pieces[k-1].hi
		}
		if p.src, err = m.spill.get(k, p.lo, p.hi, m.agreed.bs); err != nil {
			return err
		}
		sm, err := sparse.FromExtents(p.hi, p.src)
		if err != nil {
			return err
		}
		p.ext = sm.RoundOut(m.agreed.bs).Extents()
		for _, e := range p.ext {
			p.n += e.Len
		}
		if p.n > int64(len(pr.buf)) {
			return fmt.Errorf("%w: piece %d of %s kept for the read-back holds %d bytes", ErrVerify, k, m.t.display, p.n)
		}
		if p.buf, err = pr.read(ctx, rd, p.ext, p.n, nil); err != nil {
			return fmt.Errorf("reading %s back: %w", m.t.display, err)
		}
		if !m.pieceOK(p) {
			return fmt.Errorf("%w: %s read back differs at piece %d (offset %d)", ErrVerify, m.t.display, k, p.lo)
		}
		m.st.ReadBackBytes += p.n
		pages := sm.RoundOut(4096).Extents()
		err = w.WalkFrom(ctx, p.lo, func(e sparse.Extent) error {
			if e.Off >= p.hi {
				return errWindowFull
			}
			e.Len = min(e.Len, p.hi-e.Off)
			j := sort.Search(len(pages), func(j int) bool { return pages[j].End() > e.Off })
			if j == len(pages) || pages[j].Off > e.Off || pages[j].End() < e.End() {
				return fmt.Errorf("%w: %s holds data in the source's holes (at %d)", ErrVerify, m.t.display, e.Off)
			}
			return nil
		})
		if err != nil && err != errWindowFull {
			return err
		}
	}
	return nil
}

// pieceSpill keeps the maps of the pieces written, for the read-back, in
// an unlinked file beside the target: on disk, not in memory (16 bytes
// per piece in memory).
type pieceSpill struct {
	mu  sync.Mutex
	f   *os.File
	end int64
	at  [][2]int64 // per piece: offset, length
}

func newPieceSpill(dir string, n int) (*pieceSpill, error) {
	f, err := os.CreateTemp(dir, ".sparsesync-maps-*")
	if err != nil {
		return nil, fmt.Errorf("keeping the pieces' maps for the read-back: %w", err)
	}
	_ = os.Remove(f.Name())
	return &pieceSpill{f: f, at: make([][2]int64, n)}, nil
}

// put keeps w's map (nothing without a spill).
func (s *pieceSpill) put(w *want) error {
	if s == nil {
		return nil
	}
	b, err := wire.WindowFrame(w.lo, w.hi, w.src)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.WriteAt(b, s.end); err != nil {
		return fmt.Errorf("keeping the map of piece %d: %w", w.k, err)
	}
	s.at[w.k] = [2]int64{s.end, int64(len(b))}
	s.end += int64(len(b))
	return nil
}

// get returns piece k's map, as it was put.
func (s *pieceSpill) get(k int, lo, hi, bs int64) ([]sparse.Extent, error) {
	b := make([]byte, s.at[k][1])
	if _, err := s.f.ReadAt(b, s.at[k][0]); err != nil && err != io.EOF {
		return nil, fmt.Errorf("reading the map of piece %d back: %w", k, err)
	}
	_, ext, err := wire.ParseWindow(b, lo, hi, bs)
	return ext, err
}

func (s *pieceSpill) close() {
	if s != nil {
		_ = s.f.Close()
	}
}
