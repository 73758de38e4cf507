package tcpsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparsesync/sparsesync/internal/destplan"
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
// file dst. Every source first states its content (its size and a
// manifest of SHA-256 sums per piece of about 4 MiB of data, over the
// piece's data map and data; a piece's map crosses when the piece is
// fetched, so the pull's memory does not grow with the extent count; an
// older source states its whole data map and sums of data instead); the sources
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
// temporary file renamed over dst at the end. MaxAttempts in o is not used:
// a failed source is dropped.
func PullMulti(ctx context.Context, sources []MultiSource, dst string, o *Options) (MultiStats, error) {
	start := time.Now()
	ms := MultiStats{Sources: make([]SourceStats, len(sources))}
	if len(sources) == 0 {
		return ms, fmt.Errorf("multi-source pull of %s: no source", dst)
	}
	for i, s := range sources {
		ms.Sources[i].Source = s.String()
		if err := ValidateName(s.Remote); err != nil {
			return ms, fmt.Errorf("source %s: %w", s, err)
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
		if err != nil && !m.t.atomic() {
			_ = m.t.w.Ungrow() // no data past the old end: the old size back
		}
		m.t.close()
	}
	m.spill.close()
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
	// With piece maps (multi_maps.go): the target as the pull found it
	// (walked a piece at a time), its size then, whether it may hide
	// preallocations, the pieces' maps kept for the read-back, and the
	// data bytes of the pieces written.
	dstWalk *sparse.Walker
	// dstWalkMu serializes walks of dstWalk: the sources' goroutines
	// share it, and a Walker is not safe for concurrent use.
	dstWalkMu sync.Mutex
	dstSize   int64
	mayHide   bool
	spill     *pieceSpill
	dataN     atomic.Int64
}

// fetchHead is what a source states before any data moves.
type fetchHead struct {
	size     int64
	bs       int64
	m        sparse.Map
	manifest []pieceSum
	// pieces, with piece maps (wire.FeatPieceMaps), replace m and
	// manifest: no map crosses before the pieces are fetched.
	pieces []pieceEntry
	maps   bool
	id     [sha256.Size]byte // of size, block size, map and manifest
}

// npieces is the number of pieces of the statement.
func (h *fetchHead) npieces() int {
	if h.maps {
		return len(h.pieces)
	}
	return len(h.manifest)
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
	m.oneForm(heads)
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
	total := m.agreed.dataBytes()
	if !m.agreed.maps {
		m.ps = newFetchPieces(m.agreed.m, m.agreed.bs)
	}
	m.queue.reset(m.agreed.npieces(), len(groups[ids[0]]))
	if err := m.shape(ctx); err != nil {
		return err
	}
	if m.c.Progress != nil {
		m.c.Progress.Total.Store(total)
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
	t, err := openLocalTarget(m.dst, m.c.Atomic, m.c.faults)
	if err != nil {
		return err
	}
	m.t = t
	if m.agreed.maps {
		return m.shapeMaps(ctx)
	}
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
	if err := m.markIncomplete(); err != nil {
		return err
	}
	p, err := planFor(destplan.Input{Src: m.agreed.m, Dst: m.dstMap, Hidden: hidden, Unit: m.agreed.bs})
	if err != nil {
		return err
	}
	if p.resize {
		if err := t.w.SetSize(size); err != nil {
			return fmt.Errorf("truncating %s: %w", t.display, err)
		}
	}
	for _, e := range p.punch.Extents() {
		if _, err := t.w.Zero(e.Off, e.Len); err != nil {
			return fmt.Errorf("punching %s: %w", t.display, err)
		}
		m.punchedN.Add(e.Len)
	}
	// What the pieces compare against: the target's data, within the size.
	m.dstMap = m.dstMap.Resize(size)
	return nil
}

// markIncomplete says in the sidecar of a target written in place, before
// its first byte changes, that it is incomplete.
func (m *multi) markIncomplete() error {
	t := m.t
	if t.atomic() {
		return nil
	}
	sc := sidecar{State: stateIncomplete, Identity: m.identity(), Size: m.agreed.size, BlockSize: m.agreed.bs}
	if err := t.stamp(&sc); err != nil {
		return fmt.Errorf("%s: %w", t.display, err)
	}
	return t.saveSidecar(&sc)
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
	m.c.hooks.finalCheck(t.final)
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
		return fmt.Errorf("%s: %w", t.display, err)
	}
	if err := t.saveSidecar(&sc); err != nil {
		return err
	}
	m.st.Size, m.st.DataBytes, m.st.Verified = m.agreed.size, m.agreed.dataBytes(), true
	if m.agreed.maps {
		m.st.DataBytes = m.dataN.Load() // exact where the last block is cut at the size
	}
	return nil
}

// readBack reads the stored target's pieces and checks them against the
// agreed manifest, and that it holds no data in the agreed holes.
func (m *multi) readBack(ctx context.Context) error {
	if m.agreed.maps {
		return m.readBackMaps(ctx)
	}
	f := m.t.final
	rd, err := newUncachedReader(f)
	if err != nil {
		return fmt.Errorf("reading %s back: %w", m.t.display, err)
	}
	defer rd.close()
	pr := newPieceReader(m.ps.per*m.ps.bs, shortRead{m.t.display, ErrVerify})
	for k := range m.ps.n {
		ext, n := m.ps.piece(k)
		buf, err := pr.read(ctx, rd, ext, n, nil)
		if err != nil {
			return fmt.Errorf("reading %s back: %w", m.t.display, err)
		}
		if sumPiece(buf) != m.agreed.manifest[k] {
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
