package tcpsync

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparsesync/sparsesync/internal/blockhash"
	"github.com/sparsesync/sparsesync/sparse"
)

// ErrSourcesDisagree means the sources of a multi-source pull do not serve
// one version that more of them agree on than on any other: nothing was
// written.
var ErrSourcesDisagree = errors.New("tcpsync: sources disagree on the content")

// ErrPieceMismatch means a source sent a piece whose digest differs from
// the one all sources agreed on: the source is excluded and the piece
// fetched from another.
var ErrPieceMismatch = errors.New("tcpsync: piece differs from the agreed content")

// ErrNoSource means every source of a multi-source pull failed or was
// dropped before the pull completed.
var ErrNoSource = errors.New("tcpsync: no source left")

// fetchDepth is how many pieces a client asks of one source before the
// first answer arrives (each costs a piece buffer).
const fetchDepth = 2

// MultiSource is one source of PullMulti: a server and a file beneath its root.
type MultiSource struct {
	Addr   string
	Remote string
	// Token, if set, replaces Options.Token for this source.
	Token []byte
	// Dial, if set, replaces Options.Dial for this source.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Anchor makes the version this source serves the one to fetch: the
	// sources that disagree with it are dropped, however many agree among
	// themselves (a replica rebuild takes the metadata from one source and
	// the data must match it). If it fails before stating its version, the
	// pull fails.
	Anchor bool
}

// String is "addr/remote".
func (m MultiSource) String() string { return m.Addr + "/" + m.Remote }

// SourceStats is what one source of a multi-source pull did.
type SourceStats struct {
	Source string `json:"source"`
	// Pieces is the pieces this source served and that were verified.
	Pieces int `json:"pieces"`
	// CopiedBytes, ZeroBytes and UnchangedBytes are as in Stats, for the
	// verified pieces of this source.
	CopiedBytes    int64 `json:"copied_bytes"`
	ZeroBytes      int64 `json:"zero_bytes"`
	UnchangedBytes int64 `json:"unchanged_bytes"`
	// WireBytes is the bytes sent and received on its connection.
	WireBytes int64 `json:"wire_bytes"`
	// Failures counts pieces this source was given and did not deliver.
	Failures int `json:"failures"`
	// Dropped says why the source stopped taking part ("" if it did not).
	Dropped string `json:"dropped,omitempty"`
	// Err is the error that dropped it.
	Err error `json:"-"`
}

// MultiStats is what PullMulti did: the totals, and per source.
type MultiStats struct {
	Stats
	Sources []SourceStats
}

// PullMulti fetches one file from several servers at once into the local
// file dst. Every source first states its content (size, data map and a
// manifest of SHA-256 sums per piece of about 4 MiB of data); the sources
// that agree with the largest group take part and the others are dropped
// (named in Sources). A tie between the largest groups (two sources that
// disagree, say) is ErrSourcesDisagree, with nothing written. Pieces are
// then handed to the sources as they finish (work stealing); each piece is
// assembled in memory and its sum checked before it is written, so a source
// that sends wrong data is excluded at that piece. With an existing dst,
// the client sends its seeded block hashes and a source sends only the
// blocks that differ. A source that fails, stalls past the idle timeout or
// sends wrong data loses its pieces to the others; the pull succeeds while
// one source remains. dst is marked incomplete in its sidecar until every
// piece is verified and durable; a retry (with any sources) compares every
// block and moves only what is missing. With Atomic the pull writes a
// temporary file renamed over dst at the end. Retries in o are not used:
// a failed source is dropped.
func PullMulti(ctx context.Context, sources []MultiSource, dst string, o *Options) (MultiStats, error) {
	start := time.Now()
	ms := MultiStats{Sources: make([]SourceStats, len(sources))}
	if len(sources) == 0 {
		return ms, fmt.Errorf("tcpsync: multi-source pull of %s: no source", dst)
	}
	for i, s := range sources {
		ms.Sources[i].Source = s.String()
		if err := ValidateName(s.Remote); err != nil {
			return ms, fmt.Errorf("tcpsync: source %s: %w", s, err)
		}
	}
	c, err := o.withDefaults()
	if err != nil {
		return ms, err
	}
	m := &multi{c: c, sources: sources, dst: dst, st: &ms, seed: rand.Uint64(),
		heads: make(chan headMsg, len(sources)), start: make(chan struct{})}
	m.queue.cond = sync.NewCond(&m.queue.mu)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, m.queue.wake)
	defer stop()
	var wg sync.WaitGroup
	for i := range sources {
		wg.Go(func() { m.runSource(ctx, i) })
	}
	err = m.run(ctx)
	if err != nil {
		m.fail(err)
		cancel()
	}
	wg.Wait()
	if m.t != nil {
		if err == nil {
			err = m.finish(ctx)
		}
		m.t.close()
	}
	for i := range ms.Sources {
		s := &ms.Sources[i]
		ms.CopiedBytes += s.CopiedBytes
		ms.ZeroBytes += s.ZeroBytes
		ms.UnchangedBytes += s.UnchangedBytes
		if err == nil && s.Err != nil && s.Dropped == "" {
			s.Dropped = sanitize(s.Err.Error())
		}
	}
	ms.PunchedBytes = m.punched
	ms.Elapsed = time.Since(start)
	ms.Attempts = 1
	return ms, err
}

// multi is one PullMulti call.
type multi struct {
	c       Options
	sources []MultiSource
	dst     string
	st      *MultiStats
	seed    uint64
	heads   chan headMsg
	// start is closed once the sources are decided and the target shaped;
	// chosen (read after start) says who takes part.
	start  chan struct{}
	ready  bool // the target is shaped: chosen sources work
	chosen []bool
	ps     *fetchPieces
	agreed *fetchHead
	t      *target
	dstMap sparse.Map
	queue  pieceQueue
	mu     sync.Mutex // st.Sources
	// punched is destination data made holes (the shaping, then ZERO
	// ranges over data), written by the workers: atomic.
	punchedN atomic.Int64
	punched  int64
	failErr  atomic.Pointer[error]
}

// fetchHead is what a source states before any data moves.
type fetchHead struct {
	size     int64
	bs       int64
	m        sparse.Map
	manifest []pieceSum
	id       [sha256.Size]byte // of size, block size, map and manifest
}

type headMsg struct {
	i    int
	head *fetchHead
	err  error
}

// run collects the sources' statements, chooses the agreeing ones, shapes
// the target and waits until every piece is verified and written.
func (m *multi) run(ctx context.Context) error {
	started := false
	defer func() {
		if !started {
			close(m.start)
		}
	}()
	heads := make([]*fetchHead, len(m.sources))
	for range m.sources {
		select {
		case h := <-m.heads:
			heads[h.i] = h.head
			if h.err != nil {
				m.drop(h.i, "failed before the pull: "+sanitize(h.err.Error()), h.err)
			}
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	groups := map[[sha256.Size]byte][]int{}
	var ids [][sha256.Size]byte
	for i, h := range heads {
		if h == nil {
			continue
		}
		if _, ok := groups[h.id]; !ok {
			ids = append(ids, h.id)
		}
		groups[h.id] = append(groups[h.id], i)
	}
	if len(ids) == 0 {
		return fmt.Errorf("%w: %s: every source failed: %s", ErrNoSource, m.dst, m.failures())
	}
	sort.SliceStable(ids, func(a, b int) bool { return len(groups[ids[a]]) > len(groups[ids[b]]) })
	anchored := false
	for i, s := range m.sources {
		if !s.Anchor {
			continue
		}
		if heads[i] == nil {
			return fmt.Errorf("%w: %s not written: the anchor source %s failed: %s", ErrNoSource, m.dst, s, m.failures())
		}
		for j, id := range ids {
			if id == heads[i].id {
				ids[0], ids[j] = ids[j], ids[0]
			}
		}
		anchored = true
		break
	}
	if !anchored && len(ids) > 1 && len(groups[ids[0]]) == len(groups[ids[1]]) {
		var parts []string
		for _, id := range ids {
			var names []string
			for _, i := range groups[id] {
				names = append(names, m.sources[i].String())
			}
			h := heads[groups[id][0]]
			parts = append(parts, fmt.Sprintf("%s (size %d, content %x)", strings.Join(names, ", "), h.size, h.id[:6]))
		}
		return fmt.Errorf("%w: %s not written: no majority among %s", ErrSourcesDisagree, m.dst, strings.Join(parts, "; "))
	}
	m.agreed = heads[groups[ids[0]][0]]
	m.chosen = make([]bool, len(m.sources))
	for _, i := range groups[ids[0]] {
		m.chosen[i] = true
	}
	for i, h := range heads {
		if h != nil && !m.chosen[i] {
			m.drop(i, fmt.Sprintf("holds another version (size %d, content %x; the others agree on size %d, content %x)",
				h.size, h.id[:6], m.agreed.size, m.agreed.id[:6]), ErrSourcesDisagree)
		}
	}
	m.c.Logger.Info("multi-source pull", "dst", m.dst, "sources", len(groups[ids[0]]), "dropped", len(m.sources)-len(groups[ids[0]]))
	m.ps = newFetchPieces(m.agreed.m, m.agreed.bs)
	m.queue.reset(m.ps.n, len(groups[ids[0]]))
	if err := m.shape(ctx); err != nil {
		return err
	}
	if m.c.Progress != nil {
		m.c.Progress.Total.Store(m.agreed.m.RoundOut(m.agreed.bs).Bytes())
	}
	m.ready, started = true, true
	close(m.start)
	if err := m.queue.wait(); err != nil {
		return fmt.Errorf("%w: %s is incomplete: %s", err, m.dst, m.failures())
	}
	return nil
}

// shape opens the target, marks it incomplete, sizes it and punches its
// data over the agreed map's holes.
func (m *multi) shape(ctx context.Context) error {
	t, err := openLocalTarget(m.dst, m.c.Atomic)
	if err != nil {
		return err
	}
	m.t = t
	var hidden sparse.Map
	if t.final == nil {
		m.dstMap, _ = sparse.NewMap(0)
	} else {
		w, err := sparse.NewWalker(t.final)
		if err != nil {
			return err
		}
		if m.dstMap, err = w.Map(ctx); err != nil {
			return err
		}
		if hidden, err = sparse.HiddenAllocation(ctx, t.final, m.dstMap, w.Info().Allocated); err != nil {
			return err
		}
	}
	if err := t.seedTemp(ctx, m.dstMap, nil); err != nil {
		return err
	}
	size := m.agreed.size
	if !t.atomic() {
		sc := sidecar{State: stateIncomplete, Identity: m.identity(), Size: size, BlockSize: m.agreed.bs}
		if err := t.stamp(&sc); err != nil {
			return fmt.Errorf("tcpsync: %s: %w", t.display, err)
		}
		if err := t.saveSidecar(&sc); err != nil {
			return err
		}
	}
	if m.dstMap.Size() != size {
		if err := t.w.SetSize(size); err != nil {
			return fmt.Errorf("tcpsync: truncating %s: %w", t.display, err)
		}
	}
	p, err := newPlan(m.agreed.m, m.dstMap, m.agreed.bs)
	if err != nil {
		return err
	}
	for _, e := range p.punch.Union(hidden.Resize(size).Intersect(m.agreed.m.Holes())).Extents() {
		if _, err := t.w.Zero(e.Off, e.Len); err != nil {
			return fmt.Errorf("tcpsync: punching %s: %w", t.display, err)
		}
		m.punchedN.Add(e.Len)
	}
	// What the pieces compare against: the target's data, within the size.
	m.dstMap = m.dstMap.Resize(size)
	return nil
}

// identity is what the sidecar records: the agreed content, not any one
// source's file (a single-source pull never takes it for its own version).
func (m *multi) identity() string { return "multi:" + hex.EncodeToString(m.agreed.id[:]) }

// finish makes the verified target durable and final, checks it whole
// when ReadBack asks for it, and marks it complete.
func (m *multi) finish(ctx context.Context) error {
	t := m.t
	m.punched = m.punchedN.Load()
	if err := t.commit(); err != nil {
		return err
	}
	if m.c.ReadBack.on(m.c.Atomic) {
		if err := m.readBack(ctx); err != nil {
			if !t.atomic() {
				_ = t.saveSidecar(&sidecar{State: stateIncomplete, Identity: m.identity(), Size: m.agreed.size, BlockSize: m.agreed.bs})
			}
			return err
		}
		m.st.ReadBack = true
	}
	sc := sidecar{State: stateComplete, Identity: m.identity(), Size: m.agreed.size, BlockSize: m.agreed.bs, Done: m.agreed.size}
	if err := t.stamp(&sc); err != nil {
		return fmt.Errorf("tcpsync: %s: %w", t.display, err)
	}
	if err := t.saveSidecar(&sc); err != nil {
		return err
	}
	m.st.Size, m.st.DataBytes, m.st.Verified = m.agreed.size, m.agreed.m.RoundOut(m.agreed.bs).Bytes(), true
	return nil
}

// readBack reads the stored target's pieces and checks them against the
// agreed manifest, and that it holds no data in the agreed holes.
func (m *multi) readBack(ctx context.Context) error {
	f := m.t.final
	buf := make([]byte, m.ps.per*m.ps.bs)
	for k := range m.ps.n {
		ext, n := m.ps.piece(k)
		if err := readPiece(ctx, f, ext, buf[:n], nil); err != nil {
			return fmt.Errorf("tcpsync: reading %s back: %w", m.t.display, err)
		}
		if sumPiece(buf[:n]) != m.agreed.manifest[k] {
			return fmt.Errorf("%w: %s read back differs at piece %d (offset %d)", ErrVerify, m.t.display, k, ext[0].Off)
		}
		m.st.ReadBackBytes += n
	}
	got, err := sparse.NewWalker(f)
	if err != nil {
		return err
	}
	gm, err := got.Map(ctx)
	if err != nil {
		return err
	}
	if extra := gm.Difference(m.agreed.m.RoundOut(4096)); extra.Bytes() != 0 {
		return fmt.Errorf("%w: %s holds data in the source's holes (%v)", ErrVerify, m.t.display, extra)
	}
	return nil
}

// drop records why source i stopped taking part.
func (m *multi) drop(i int, why string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &m.st.Sources[i]
	if s.Dropped == "" {
		s.Dropped, s.Err = why, err
		m.c.Logger.Warn("source dropped", "source", s.Source, "why", why)
	}
}

// failures lists the dropped sources and why.
func (m *multi) failures() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var parts []string
	for _, s := range m.st.Sources {
		if s.Dropped != "" {
			parts = append(parts, s.Source+": "+s.Dropped)
		}
	}
	return strings.Join(parts, "; ")
}

// fail ends the pull: the workers stop taking pieces.
func (m *multi) fail(err error) {
	m.failErr.CompareAndSwap(nil, &err)
	m.queue.abort(err)
}

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
			_ = f.send(fDone, 0)
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
	if err := f.send(fOpen, 0, openBody(opFetch, 0, uint32(m.c.BlockSize), remote)); err != nil {
		return nil, err
	}
	if _, _, err := f.expect(fOpened); err != nil {
		return nil, err
	}
	_, body, err := f.expect(fSrcInfo)
	if err != nil {
		return nil, err
	}
	d := dec{b: body, t: fSrcInfo}
	size, bs, _ := d.u64(), d.u32(), d.u32()
	_ = d.bytes(maxIdentity)
	if err := d.end(); err != nil {
		return nil, err
	}
	if size > maxSize {
		return nil, fmt.Errorf("%w: source size %d over the limit %d", ErrProtocol, size, int64(maxSize))
	}
	if int(bs) != m.c.BlockSize {
		return nil, fmt.Errorf("%w: block size %d, asked for %d", ErrProtocol, bs, m.c.BlockSize)
	}
	sm, err := readMap(f, int64(size))
	if err != nil {
		return nil, err
	}
	h := &fetchHead{size: int64(size), bs: int64(bs), m: sm}
	ps := newFetchPieces(sm, h.bs)
	for {
		flags, body, err := f.expect(fManifest)
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
		if flags&flagLast != 0 {
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

// want is a piece asked of a source and not yet answered.
type want struct {
	k      int
	ext    []sparse.Extent
	n      int64
	buf    []byte
	held   []bool // blocks the target holds data in (their bytes are in buf)
	sent   []bool // blocks the source sent (DATA or ZERO)
	zero   []bool // blocks the source sent as ZERO
	copied int64
	zeroed int64
}

// work asks source i for pieces, fetchDepth at a time, until none is left.
func (m *multi) work(ctx context.Context, i int, f *framer) (err error) {
	var pending []*want
	defer func() {
		for _, w := range pending {
			m.queue.requeue(w.k)
		}
		if err != nil {
			m.mu.Lock()
			m.st.Sources[i].Failures += len(pending)
			m.mu.Unlock()
		}
	}()
	bufs := make([][]byte, 0, fetchDepth+1)
	h := blockhash.New(m.seed)
	for {
		for len(pending) < fetchDepth {
			f.wd.hold(1)
			k, ok := m.queue.take(len(pending) > 0)
			f.wd.hold(-1)
			if !ok {
				break
			}
			var buf []byte
			if n := len(bufs); n > 0 {
				buf, bufs = bufs[n-1], bufs[:n-1]
			} else {
				buf = make([]byte, m.ps.per*m.ps.bs)
			}
			w, err := m.ask(ctx, f, h, k, buf)
			if w == nil {
				// Not the source's fault: the target could not be read.
				m.queue.requeue(k)
				m.fail(err)
				return err
			}
			pending = append(pending, w)
			if err != nil {
				return err
			}
		}
		if len(pending) == 0 {
			if err := m.queue.failed(); err != nil {
				return err
			}
			if err := f.send(fDone, 0); err != nil {
				return err
			}
			_, _, err := f.expect(fDoneAck)
			return err
		}
		w := pending[0]
		if err := m.receive(ctx, f, w); err != nil {
			return err
		}
		pending = pending[1:]
		if err := m.apply(f, i, w); err != nil {
			// Not the source's fault: a local write failed. The pull ends.
			m.queue.requeue(w.k)
			m.fail(err)
			return err
		}
		bufs = append(bufs, w.buf)
	}
}

// ask reads the target's blocks of piece k into buf and sends FETCH with
// their hashes.
func (m *multi) ask(ctx context.Context, f *framer, h *blockhash.Hasher, k int, buf []byte) (*want, error) {
	ext, n := m.ps.piece(k)
	nb := int(min(m.ps.per, m.ps.nblocks-int64(k)*m.ps.per))
	w := &want{k: k, ext: ext, n: n, buf: buf[:n], held: make([]bool, nb), sent: make([]bool, nb), zero: make([]bool, nb)}
	clear(w.buf)
	bitmap := make([]byte, (nb+7)/8)
	var hashes []byte
	dext := m.dstMap.Extents()
	err := m.ps.blocks(ext, func(b int, off, at, bn int64) error {
		j := sort.Search(len(dext), func(j int) bool { return dext[j].End() > off })
		if j == len(dext) || dext[j].Off >= off+bn {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if err := f.m.read(bn); err != nil {
			return err
		}
		if _, err := m.t.w.OS().ReadAt(w.buf[at:at+bn], off); err != nil {
			return fmt.Errorf("tcpsync: reading %s at %d: %w", m.t.display, off, err)
		}
		w.held[b] = true
		bitmap[b/8] |= 1 << (b % 8)
		hashes = binary.LittleEndian.AppendUint64(hashes, h.Sum(w.buf[at:at+bn]))
		return nil
	})
	if err != nil {
		return nil, err
	}
	b := binary.LittleEndian.AppendUint32(nil, uint32(k))
	b = binary.LittleEndian.AppendUint64(b, m.seed)
	b = binary.LittleEndian.AppendUint32(b, uint32(nb))
	if err := f.send(fFetch, 0, b, bitmap, hashes); err != nil {
		return w, err
	}
	return w, nil
}

// receive reads the answer to w up to its PIECEEND and checks its sum.
func (m *multi) receive(ctx context.Context, f *framer, w *want) error {
	for {
		t, _, body, err := f.readFrame()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("%w: %w", errIdle, err)
			}
			return err
		}
		switch t {
		case fData, fZero:
			if err := m.onRange(f, w, t, body); err != nil {
				return err
			}
		case fPieceEnd:
			d := dec{b: body, t: t}
			k := d.u32()
			if err := d.end(); err != nil {
				return err
			}
			if int(k) != w.k {
				return fmt.Errorf("%w: PIECEEND of piece %d, awaiting %d", ErrProtocol, k, w.k)
			}
			if sumPiece(w.buf) != m.agreed.manifest[w.k] {
				return fmt.Errorf("%w: piece %d (offset %d, %d bytes)", ErrPieceMismatch, w.k, w.ext[0].Off, w.n)
			}
			return nil
		case fError:
			return decodeError(body)
		default:
			return fmt.Errorf("%w: %s while awaiting piece %d", ErrProtocol, t, w.k)
		}
	}
}

// onRange applies a DATA or ZERO range of the source to w's buffer: whole
// blocks of the piece, each sent at most once.
func (m *multi) onRange(f *framer, w *want, t frameType, body []byte) error {
	d := dec{b: body, t: t}
	var off, n uint64
	var raw []byte
	if t == fData {
		off, n = d.u64(), uint64(d.u32())
		raw, d.b = d.b, nil
		if d.err == nil && uint64(len(raw)) != n {
			return fmt.Errorf("%w: DATA of %d bytes says %d", ErrProtocol, len(raw), n)
		}
	} else {
		off, n = d.u64(), d.u64()
	}
	if err := d.end(); err != nil {
		return err
	}
	o, l, err := offLen(t, off, n, m.agreed.size)
	if err != nil {
		return err
	}
	// Find the range's blocks in the piece: it must cover whole blocks.
	done := int64(0)
	err = m.ps.blocks(w.ext, func(b int, boff, at, bn int64) error {
		if boff+bn <= o || boff >= o+l {
			return nil
		}
		if boff < o || boff+bn > o+l || w.sent[b] {
			return fmt.Errorf("%w: %s at %d of %d bytes splits or repeats a block of piece %d", ErrProtocol, t, o, l, w.k)
		}
		w.sent[b] = true
		if t == fData {
			copy(w.buf[at:at+bn], raw[boff-o:boff-o+bn])
		} else {
			clear(w.buf[at : at+bn])
			w.zero[b] = true
		}
		done += bn
		return nil
	})
	if err != nil {
		return err
	}
	if done != l {
		return fmt.Errorf("%w: %s at %d of %d bytes outside piece %d", ErrProtocol, t, o, l, w.k)
	}
	if t == fData {
		w.copied += l
	} else {
		w.zeroed += l
	}
	f.progress(l)
	return nil
}

// apply writes a verified piece: the blocks the source sent, data only
// where the agreed map has data, and holes for zero blocks over the
// target's data.
func (m *multi) apply(f *framer, i int, w *want) error {
	src := m.agreed.m.Extents()
	var unchanged int64
	err := m.ps.blocks(w.ext, func(b int, off, at, bn int64) error {
		if !w.sent[b] {
			if w.held[b] {
				unchanged += bn
			}
			return nil
		}
		if w.zero[b] {
			if w.held[b] {
				if _, err := m.t.w.Zero(off, bn); err != nil {
					return fmt.Errorf("tcpsync: %s: %w", m.t.display, err)
				}
				m.punchedN.Add(bn)
			}
			return nil
		}
		end := off + bn
		j := sort.Search(len(src), func(j int) bool { return src[j].End() > off })
		for ; j < len(src) && src[j].Off < end; j++ {
			a, e := max(src[j].Off, off), min(src[j].End(), end)
			if err := f.m.write(e - a); err != nil {
				return err
			}
			if _, err := m.t.w.WriteAt(w.buf[at+a-off:at+e-off], a); err != nil {
				return fmt.Errorf("tcpsync: writing %s at %d: %w", m.t.display, a, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	m.queue.done(w.k)
	if p := m.c.Progress; p != nil {
		p.Done.Add(w.n)
	}
	m.mu.Lock()
	s := &m.st.Sources[i]
	s.Pieces++
	s.CopiedBytes += w.copied
	s.ZeroBytes += w.zeroed
	s.UnchangedBytes += unchanged
	m.mu.Unlock()
	return nil
}

// pieceQueue hands pieces to sources on demand.
type pieceQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	todo    []int // pieces to hand out, next first
	out     int   // pieces handed out, not done
	left    int   // pieces not done
	workers int   // sources still taking part
	err     error
}

func (q *pieceQueue) reset(n, workers int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.todo = make([]int, n)
	for k := range q.todo {
		q.todo[k] = n - 1 - k
	}
	q.left, q.workers = n, workers
}

func (q *pieceQueue) wake() {
	q.mu.Lock()
	if q.err == nil {
		q.err = context.Canceled
	}
	q.mu.Unlock()
	q.cond.Broadcast()
}

// take returns the next piece; when none is queued it waits while pieces
// are out (one may come back), unless nowait. false: nothing to do.
func (q *pieceQueue) take(nowait bool) (int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.err == nil && len(q.todo) == 0 && q.left > 0 && !nowait {
		q.cond.Wait()
	}
	if q.err != nil || len(q.todo) == 0 {
		return 0, false
	}
	k := q.todo[len(q.todo)-1]
	q.todo = q.todo[:len(q.todo)-1]
	q.out++
	return k, true
}

func (q *pieceQueue) requeue(k int) {
	q.mu.Lock()
	q.todo = append(q.todo, k)
	q.out--
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *pieceQueue) done(int) {
	q.mu.Lock()
	q.out--
	q.left--
	q.mu.Unlock()
	q.cond.Broadcast()
}

// leave says a source stopped taking pieces.
func (q *pieceQueue) leave() {
	q.mu.Lock()
	q.workers--
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *pieceQueue) abort(err error) {
	q.mu.Lock()
	if q.err == nil {
		q.err = err
	}
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *pieceQueue) failed() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// wait returns once every piece is done (nil), or every source left with
// pieces not done (ErrNoSource), or the pull was aborted.
func (q *pieceQueue) wait() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.err == nil && q.left > 0 && q.workers > 0 {
		q.cond.Wait()
	}
	switch {
	case q.err != nil:
		return q.err
	case q.left > 0:
		return ErrNoSource
	}
	return nil
}
