package ganeti

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// BalanceOptions configures Balance. A nil *BalanceOptions, and the zero
// value of each field, mean hbal's defaults.
type BalanceOptions struct {
	// MinGain and MinGainLimit are hbal's --min-gain and --min-gain-limit:
	// a step is taken only if it improves the score, and, once the score
	// is at most MinGainLimit, only if it improves it by at least MinGain.
	// Zero means hbal's defaults, 0.01 and 0.1; a negative value means
	// none (what hbal's 0 does: any improving step is taken).
	MinGain      float64
	MinGainLimit float64
	// MinScore stops balancing once the score is at most this (hbal -e).
	// Zero means hbal's default, 1e-9; a negative value means 0.
	MinScore float64
	// MaxRounds limits the number of moves; zero means no limit (hbal's
	// default) and a negative value means no move at all, only the score
	// (hbal -l 0).
	MaxRounds int
	// NoDiskMoves allows only failovers and migrations (hbal --no-disk-moves).
	NoDiskMoves bool
	// IgnoreSoftErrors skips the soft checks (N+1, vCPU ratio, tags).
	IgnoreSoftErrors bool
	// Group names the node group to balance; it may be empty when the
	// cluster has a single group (like hbal -G).
	Group string
}

// DefaultBalanceOptions returns hbal's defaults, spelled out (a nil or
// zero BalanceOptions means the same).
func DefaultBalanceOptions() *BalanceOptions {
	o := &BalanceOptions{}
	o.setDefaults()
	return o
}

func (o *BalanceOptions) setDefaults() {
	if o.MinGain == 0 {
		o.MinGain = 0.01
	}
	if o.MinGainLimit == 0 {
		o.MinGainLimit = 0.1
	}
	if o.MinScore == 0 {
		o.MinScore = 1e-9
	}
}

// Validate reports options that cannot be used, naming the field.
func (o *BalanceOptions) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"MinGain", o.MinGain}, {"MinGainLimit", o.MinGainLimit}, {"MinScore", o.MinScore}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%w: %s %v must be a finite number", ErrOptions, f.name, f.v)
		}
	}
	return nil
}

// options are the planners' options types.
type options[T any] interface {
	*T
	Validate() error
	setDefaults()
}

// prepare is a planner's start: its own copy of the caller's options (nil:
// the zero value), checked, with the defaults filled in, and c loaded.
func prepare[T any, P options[T]](c *Cluster, opts P) (P, *State, error) {
	var o T
	if opts != nil {
		o = *opts
	}
	if err := P(&o).Validate(); err != nil {
		return nil, nil, err
	}
	P(&o).setDefaults()
	s, err := Load(c)
	if err != nil {
		return nil, nil, err
	}
	return &o, s, nil
}

// PlannedMove is one balancing step.
type PlannedMove struct {
	Instance      string   `json:"instance"`
	Kind          MoveKind `json:"-"`
	KindName      string   `json:"kind"`
	FromPrimary   string   `json:"from"`
	FromSecondary string   `json:"from_secondary,omitempty"`
	ToPrimary     string   `json:"to"`
	ToSecondary   string   `json:"to_secondary,omitempty"`
	Score         float64  `json:"score"`
	Commands      []string `json:"commands"`
}

// BalanceResult is the outcome of Balance.
type BalanceResult struct {
	Group        string        `json:"group"`
	InitialScore float64       `json:"score_before"`
	FinalScore   float64       `json:"score_after"`
	Moves        []PlannedMove `json:"moves"`
}

// Balance runs hbal's algorithm on c and returns the moves in order.
// A nil opts means the defaults.
func Balance(c *Cluster, opts *BalanceOptions) (*BalanceResult, error) {
	opts, s, err := prepare(c, opts)
	if err != nil {
		return nil, err
	}
	g := -1
	switch {
	case opts.Group != "":
		for i := range c.Groups {
			if c.Groups[i].Name == opts.Group || c.Groups[i].UUID == opts.Group {
				g = i
			}
		}
		if g < 0 {
			return nil, fmt.Errorf("%w: no node group %q", ErrReference, opts.Group)
		}
	case len(c.Groups) > 1:
		return nil, fmt.Errorf("%w: found %d node groups; choose one", ErrInvalid, len(c.Groups))
	case len(c.Groups) == 1:
		g = 0
	}
	res := &BalanceResult{}
	if g >= 0 {
		s = s.restrictGroup(g)
		res.Group = c.Groups[g].Name
	}
	b := newBalancer(s, moveAll)
	res.InitialScore = b.cur
	for opts.MaxRounds == 0 || len(res.Moves) < opts.MaxRounds {
		if !(b.cur > opts.MinScore) {
			break
		}
		m, ok := b.step(opts.MinGain, opts.MinGainLimit, opts.IgnoreSoftErrors, opts.NoDiskMoves)
		if !ok {
			break
		}
		res.Moves = append(res.Moves, m)
	}
	res.FinalScore = b.cur
	return res, nil
}

// restrictGroup returns the state of one node group: its nodes (in order)
// and the instances whose primary node is in it, as hbal sees a group.
func (s *State) restrictGroup(g int) *State {
	remap := make([]int, len(s.nodes))
	out := &State{c: s.c}
	var orig []int
	for i := range s.nodes {
		if s.nodes[i].group == g {
			remap[i] = len(out.nodes)
			out.nodes = append(out.nodes, s.nodes[i])
			out.alias = append(out.alias, s.alias[i])
			orig = append(orig, i)
		} else {
			remap[i] = -(i + 2)
		}
	}
	if len(orig) == len(s.nodes) {
		return s
	}
	for i := range out.nodes {
		n := &out.nodes[i]
		ps := make([]peer, len(n.peers))
		for k, p := range n.peers {
			ps[k] = peer{pdx: remap[p.pdx], mem: p.mem}
		}
		slices.SortFunc(ps, func(a, b peer) int { return a.pdx - b.pdx })
		n.peers = ps
	}
	for i := range s.insts {
		in := s.insts[i]
		if remap[in.pNode] < 0 {
			continue
		}
		in.pNode = remap[in.pNode]
		if in.sNode >= 0 {
			if remap[in.sNode] < 0 {
				in.sNode = -1
				in.movable = false
			} else {
				in.sNode = remap[in.sNode]
			}
		}
		out.insts = append(out.insts, in)
		out.instIdx = append(out.instIdx, s.instIndex(i))
	}
	out.nodeIdx = make([]int, len(orig))
	for k, i := range orig {
		out.nodeIdx[k] = s.nodeIndex(i)
	}
	return out
}

func (s *State) nodeIndex(i int) int {
	if s.nodeIdx == nil {
		return i
	}
	return s.nodeIdx[i]
}

func (s *State) instIndex(i int) int {
	if s.instIdx == nil {
		return i
	}
	return s.instIdx[i]
}

func (s *State) nodeName(i int) string {
	if i < 0 {
		return ""
	}
	return s.c.Nodes[s.nodeIndex(i)].Name
}

func (s *State) nodeAlias(i int) string {
	if i < 0 {
		return ""
	}
	return s.alias[i]
}

func (s *State) instName(i int) string { return s.c.Instances[s.instIndex(i)].Name }

// moveFilter selects which instances a balancer may move.
type moveFilter int

const (
	moveAll      moveFilter = iota // every movable, auto-balanced instance (hbal)
	moveExternal                   // only externally mirrored instances
	moveDRBD                       // externally mirrored and DRBD instances
)

func (f moveFilter) allows(in *instState) bool {
	switch f {
	case moveExternal:
		return in.tmpl.Mirror() == MirrorExternal
	case moveDRBD:
		return in.tmpl.Mirror() == MirrorExternal || in.tmpl == DRBD
	default:
		return true
	}
}

// balancer runs hbal steps on a State it owns.
type balancer struct {
	s      *State
	filter moveFilter
	vecs   []metricVec
	agg    aggregates
	cur    float64
	online []int
	cands  []cand
	r      moveResult
	// parallel is the number of goroutines a large step may use.
	parallel int
	workers  []scanWorker
	// Migration target cache: the vector of node t after adding an
	// externally mirrored instance of shape h (with or without the soft
	// checks), valid until node t changes.
	shape   []int32 // per instance; -1 if not cached
	shapeOf []int   // a representative instance per shape
	tc      []tcEntry
	tcValid []bool
	// topK > 0 prunes the scan: an instance is only tried on the topK
	// nodes ranked best for its shape (see rankTargets).
	topK    int
	ranks   [][]int
	rankAge int   // steps since rankTargets ran
	fresh   []int // nodes changed since then (tried for every instance)
	// bounded scores only the migrations a lower bound cannot rule out
	// (see scanBounded); it takes the same decisions as the full scan.
	bounded bool
	bound   boundScratch
	// refreshAfter, set by tests, replaces refreshEvery (see scanBounded).
	refreshAfter int
	// onBound, set by tests, sees every DRBD disk move's bound next to
	// its estimate (the bound must not exceed it) and the two sides the
	// bound was built from.
	onBound  func(ii int, kind MoveKind, tdx int, bound, est float64, own, tgt *ivEntry)
	extShape []bool   // shape is externally mirrored
	nodeVer  []uint32 // bumped whenever a node changes
	// Stats
	steps, evals, exacts int
}

type cand struct {
	ii   int32
	tdx  int32
	kind MoveKind
	est  float64
}

func newBalancer(s *State, f moveFilter) *balancer {
	b := &balancer{s: s, filter: f, parallel: runtime.GOMAXPROCS(0)}
	b.initShapes()
	b.reset()
	return b
}

// reset recomputes vectors, aggregates and the exact score from the state;
// cached migration targets stay valid for nodes that did not change (see
// invalidate).
func (b *balancer) reset() {
	s := b.s
	if cap(b.vecs) < len(s.nodes) {
		b.vecs = make([]metricVec, len(s.nodes))
	}
	b.vecs = b.vecs[:len(s.nodes)]
	b.online = b.online[:0]
	for i := range s.nodes {
		b.vecs[i] = s.nodes[i].vector()
		if !s.nodes[i].offline {
			b.online = append(b.online, i)
		}
	}
	b.agg.build(s.nodes, b.vecs)
	b.cur = exactScore(len(s.nodes), func(i int) *metricVec { return &b.vecs[i] }, func(i int) *nodeState { return &s.nodes[i] }, &metricWeights)
}

// estimateWindow is how far above the best estimate a candidate may be and
// still be re-scored exactly; it bounds the rounding error of the running
// sums.
const estimateWindow = 1e-5

// evaluate applies one candidate to scratch space and returns its estimated
// score.
func (b *balancer) evaluate(r *moveResult, ii int, kind MoveKind, tdx int, force bool) (float64, bool) {
	if !b.s.applyMove(ii, kind, tdx, force, true, r) {
		return 0, false
	}
	var ch [3]change
	var nv [3]metricVec
	for k := 0; k < r.nn; k++ {
		i := r.idx[k]
		nv[k] = r.nodes[k].vector()
		ch[k] = change{old: &b.vecs[i], new: &nv[k], oldN: &b.s.nodes[i], newN: &r.nodes[k]}
	}
	return b.agg.estimate(ch[:r.nn]), true
}

// exact returns the exact (Ganeti) score of a candidate.
func (b *balancer) exact(c cand, force bool) float64 {
	if !b.s.applyMove(int(c.ii), c.kind, int(c.tdx), force, true, &b.r) {
		return math.Inf(1)
	}
	b.exacts++
	var nv [3]metricVec
	for k := 0; k < b.r.nn; k++ {
		nv[k] = b.r.nodes[k].vector()
	}
	r := &b.r
	vec := func(i int) *metricVec {
		for k := 0; k < r.nn; k++ {
			if r.idx[k] == i {
				return &nv[k]
			}
		}
		return &b.vecs[i]
	}
	node := func(i int) *nodeState {
		for k := 0; k < r.nn; k++ {
			if r.idx[k] == i {
				return &r.nodes[k]
			}
		}
		return &b.s.nodes[i]
	}
	return exactScore(len(b.s.nodes), vec, node, &metricWeights)
}

var noDelta delta

type tcEntry struct {
	vec metricVec
	d   delta // vec against the node's current vector
	ok  bool
}

// initShapes groups externally mirrored instances by everything that
// decides how adding them changes a node.
func (b *balancer) initShapes() {
	type key struct {
		mem, dsk, vcpus, su, sp, loc int
		status                       string
		tmpl                         DiskTemplate
		util                         dynUtil
		fc                           bool
		excl, dsrd                   string
	}
	ids := map[key]int32{}
	b.shape = make([]int32, len(b.s.insts))
	b.shapeOf = b.shapeOf[:0]
	for i := range b.s.insts {
		in := &b.s.insts[i]
		b.shape[i] = -1
		if in.tmpl.Mirror() == MirrorNone {
			continue
		}
		k := key{in.mem, in.dsk, in.vcpus, in.spindleUse, in.spindles, in.locScore, in.status, in.tmpl, in.util,
			in.forthcoming, strings.Join(in.exclTags, "\x00"), strings.Join(in.dsrdTags, "\x00")}
		id, ok := ids[k]
		if !ok {
			id = int32(len(b.shapeOf))
			ids[k] = id
			b.shapeOf = append(b.shapeOf, i)
		}
		b.shape[i] = id
	}
	b.extShape = make([]bool, len(b.shapeOf))
	for h, rep := range b.shapeOf {
		b.extShape[h] = b.s.insts[rep].tmpl.Mirror() == MirrorExternal
	}
	b.tc = make([]tcEntry, len(b.s.nodes)*len(b.shapeOf)*2)
	b.tcValid = make([]bool, len(b.s.nodes))
	b.nodeVer = make([]uint32, len(b.s.nodes))
}

// invalidateAll drops every cached migration target.
func (b *balancer) invalidateAll() {
	for i := range b.tcValid {
		b.tcValid[i] = false
		b.nodeVer[i]++
	}
}

// refreshTargets recomputes the cache rows of nodes that changed.
func (b *balancer) refreshTargets() {
	ns := len(b.shapeOf)
	for _, t := range b.online {
		if b.tcValid[t] {
			continue
		}
		for h, rep := range b.shapeOf {
			in := &b.s.insts[rep]
			for f := 0; f < 2; f++ {
				e := &b.tc[(t*ns+h)*2+f]
				n := b.s.nodes[t]
				if in.tmpl == DRBD {
					// Only used to rank targets (pruned mode): the node
					// as a new secondary.
					e.ok = f == 0 && n.addSec(in, -1, false, true)
				} else {
					e.ok = n.addPri(in, f == 1)
				}
				if e.ok {
					e.vec = n.vector()
					b.agg.delta(&b.vecs[t], &e.vec, false, &e.d)
				}
			}
		}
		b.tcValid[t] = true
	}
}

// rankEvery is how many steps a ranking is reused; nodes changed in between
// are tried in addition to the ranked ones. Ranking from the cached deltas is
// cheap enough to redo every step.
const rankEvery = 4

// rankTargets keeps, per shape, the topK online nodes whose score improves
// most (or worsens least) when they take in an instance of that shape,
// sorted by node index (Ganeti's scan order).
func (b *balancer) rankTargets() {
	ns := len(b.shapeOf)
	if len(b.ranks) != 2*ns {
		b.ranks = make([][]int, 2*ns)
	}
	type kv struct {
		key float64
		t   int
	}
	best := make([]kv, 0, b.topK+1)
	for h := 0; h < 2*ns; h++ {
		// Entry h/2 of the cache, strict (even h) or with the soft checks
		// skipped (odd h: moves off offline nodes).
		best = best[:0]
		for _, t := range b.online {
			e := &b.tc[t*2*ns+h]
			if !e.ok {
				continue
			}
			k := b.agg.estimate2(&e.d, &noDelta)
			if len(best) == b.topK && !(k < best[len(best)-1].key) {
				continue
			}
			i := len(best)
			if i < b.topK {
				best = append(best, kv{})
			} else {
				i--
			}
			for i > 0 && best[i-1].key > k {
				best[i] = best[i-1]
				i--
			}
			best[i] = kv{k, t}
		}
		r := b.ranks[h][:0]
		for _, x := range best {
			r = append(r, x.t)
		}
		slices.Sort(r)
		b.ranks[h] = r
	}
}

// scanWorker is the scratch space of one goroutine scanning candidates.
type scanWorker struct {
	targets []int
	r       moveResult
	cands   []cand
	best    float64
	evals   int
}

// parallelThreshold is the number of candidate (instance, node) pairs from
// which a step scans instances on several goroutines.
const parallelThreshold = 4000

// step performs one hbal balancing step: the first strictly best move in
// Ganeti's scan order, if it satisfies the gain rules.
func (b *balancer) step(minGain, minGainLimit float64, force, noDiskMoves bool) (PlannedMove, bool) {
	s := b.s
	n := b.parallel
	if n < 1 || len(s.insts)*len(b.online) < parallelThreshold {
		n = 1
	}
	if !b.agg.hasMap || b.topK > 0 {
		b.refreshTargets()
	}
	if b.topK > 0 {
		if b.ranks == nil || b.rankAge >= rankEvery {
			b.rankTargets()
			b.rankAge = 0
			b.fresh = b.fresh[:0]
		}
		b.rankAge++
	}
	bounded := b.bounded && b.topK == 0 && !b.agg.hasMap
	if bounded {
		n = max(b.parallel, 1)
	}
	if len(b.workers) < n {
		b.workers = append(b.workers, make([]scanWorker, n-len(b.workers))...)
	}
	if bounded {
		n = 1 // scanBounded merges its helpers into worker 0
		b.scanBounded(&b.workers[0], force, noDiskMoves)
	} else if n == 1 {
		b.scan(&b.workers[0], 0, len(s.insts), force, noDiskMoves)
	} else {
		var wg sync.WaitGroup
		per := (len(s.insts) + n - 1) / n
		for k := 0; k < n; k++ {
			lo, hi := min(k*per, len(s.insts)), min((k+1)*per, len(s.insts))
			wg.Add(1)
			go func(w *scanWorker) {
				defer wg.Done()
				b.scan(w, lo, hi, force, noDiskMoves)
			}(&b.workers[k])
		}
		wg.Wait()
	}
	// Merge in scan order (workers cover consecutive instance ranges).
	best := math.Inf(1)
	b.cands = b.cands[:0]
	for k := 0; k < n; k++ {
		w := &b.workers[k]
		best = min(best, w.best)
		b.cands = append(b.cands, w.cands...)
		b.evals += w.evals
	}
	// Re-score the near-best candidates exactly; the first minimum wins.
	bestExact := b.cur
	var win *cand
	for k := range b.cands {
		c := &b.cands[k]
		if !(c.est <= best+estimateWindow) {
			continue
		}
		e := b.exact(*c, force)
		if e < bestExact {
			bestExact = e
			win = c
		}
	}
	if win == nil {
		return PlannedMove{}, false
	}
	if !(bestExact < b.cur && (b.cur > minGainLimit || b.cur-bestExact >= minGain)) {
		return PlannedMove{}, false
	}
	ii := int(win.ii)
	before := s.insts[ii]
	s.applyMove(ii, win.kind, int(win.tdx), force, false, &b.r)
	s.commit(ii, &b.r)
	for k := 0; k < b.r.nn; k++ {
		i := b.r.idx[k]
		b.tcValid[i] = false
		b.nodeVer[i]++
		if b.topK > 0 && !s.nodes[i].offline {
			if j, found := slices.BinarySearch(b.fresh, i); !found {
				b.fresh = slices.Insert(b.fresh, j, i)
			}
		}
	}
	b.reset()
	b.cur = bestExact
	b.steps++
	after := s.insts[ii]
	return PlannedMove{
		Instance: s.instName(ii), Kind: win.kind, KindName: win.kind.String(),
		FromPrimary: s.nodeName(before.pNode), FromSecondary: s.nodeName(before.sNode),
		ToPrimary: s.nodeName(after.pNode), ToSecondary: s.nodeName(after.sNode),
		Score:    bestExact,
		Commands: moveCommands(win.kind, s.instName(ii), s.nodeAlias(int(win.tdx))),
	}, true
}

// scan scores the candidate moves of instances [lo, hi) in Ganeti's order,
// keeping those within estimateWindow of the best estimate seen.
func (b *balancer) scan(w *scanWorker, lo, hi int, force, noDiskMoves bool) {
	w.reset()
	for ii := lo; ii < hi; ii++ {
		b.scanInst(w, ii, force, noDiskMoves)
	}
}

func (w *scanWorker) reset() {
	w.cands = w.cands[:0]
	w.best = math.Inf(1)
	w.evals = 0
}

// record keeps a candidate if its estimate is within estimateWindow of the
// best estimate seen so far.
func (w *scanWorker) record(ii int, kind MoveKind, tdx int, est float64) {
	if !(est <= w.best+estimateWindow) {
		return
	}
	w.cands = append(w.cands, cand{ii: int32(ii), tdx: int32(tdx), kind: kind, est: est})
	if est < w.best {
		w.best = est
	}
}

// scanInst scores the candidate moves of instance ii in Ganeti's order.
func (b *balancer) scanInst(w *scanWorker, ii int, force, noDiskMoves bool) {
	s := b.s
	try := func(ii int, kind MoveKind, tdx int) {
		if est, ok := b.evaluate(&w.r, ii, kind, tdx, force); ok {
			w.evals++
			w.record(ii, kind, tdx, est)
		}
	}
	var src, tgt nodeState
	var srcVec, tgtVec metricVec
	var srcD delta
	in := &s.insts[ii]
	if !in.movable || !in.autoBalance || !b.filter.allows(in) {
		return
	}
	mt := in.tmpl.Mirror()
	if mt == MirrorNone {
		return
	}
	useSec := in.sNode >= 0 && !s.nodes[in.sNode].offline
	srcReady := false
	if mt == MirrorInternal && useSec {
		try(ii, Failover, -1)
	}
	targets := b.online
	if b.topK > 0 {
		h := 2 * int(b.shape[ii])
		if mt == MirrorExternal && (s.nodes[in.pNode].offline || force) {
			h++
		}
		targets = b.ranks[h]
		if mt == MirrorExternal {
			// Changed nodes are cheap to try for migrations; DRBD
			// moves (four per node) keep to the ranking.
			targets = mergeSorted(w.targets[:0], b.ranks[h], b.fresh)
			w.targets = targets
		}
	}
	for _, tdx := range targets {
		if tdx == in.pNode || tdx == in.sNode {
			continue
		}
		if mt == MirrorExternal {
			// Fast path for migrations (most candidates): the source
			// side is the same for every target.
			if !srcReady {
				src = s.nodes[in.pNode]
				src.removePri(in)
				srcVec = src.vector()
				b.agg.delta(&b.vecs[in.pNode], &srcVec, src.offline, &srcD)
				srcReady = true
			}
			op := &s.nodes[in.pNode]
			if !migrationOK(op, &s.nodes[tdx]) {
				continue
			}
			if !b.agg.hasMap && in.tmpl.Mirror() == MirrorExternal {
				fb := 0
				if op.offline || force {
					fb = 1
				}
				e := &b.tc[(tdx*len(b.shapeOf)+int(b.shape[ii]))*2+fb]
				if !e.ok {
					continue
				}
				w.evals++
				w.record(ii, Migrate, tdx, b.agg.estimate2(&srcD, &e.d))
				continue
			}
			tgt = s.nodes[tdx]
			if !tgt.addPri(in, op.offline || force) {
				continue
			}
			w.evals++
			tgtVec = tgt.vector()
			ch := [2]change{
				{old: &b.vecs[in.pNode], new: &srcVec, oldN: op, newN: &src},
				{old: &b.vecs[tdx], new: &tgtVec, oldN: &s.nodes[tdx], newN: &tgt},
			}
			w.record(ii, Migrate, tdx, b.agg.estimate(ch[:]))
			continue
		}
		if noDiskMoves {
			continue
		}
		try(ii, ReplaceSecondary, tdx)
		try(ii, ReplaceAndFailover, tdx)
		if useSec {
			try(ii, ReplacePrimary, tdx)
			try(ii, FailoverAndReplace, tdx)
		}
	}
}

// mergeSorted merges two sorted index lists without duplicates into dst.
func mergeSorted(dst, a, b []int) []int {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			dst = append(dst, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			dst = append(dst, b[j])
			j++
		default:
			dst = append(dst, a[i])
			i++
			j++
		}
	}
	return dst
}

// moveCommands are the gnt-instance commands hbal prints for a move.
func moveCommands(k MoveKind, inst, target string) []string {
	mig := "gnt-instance migrate -f " + inst
	rep := "gnt-instance replace-disks -n " + target + " " + inst
	switch k {
	case Failover:
		return []string{mig}
	case Migrate:
		return []string{"gnt-instance migrate -f -n " + target + " " + inst}
	case ReplacePrimary:
		return []string{mig, rep, mig}
	case ReplaceSecondary:
		return []string{rep}
	case ReplaceAndFailover:
		return []string{rep, mig}
	case FailoverAndReplace:
		return []string{mig, rep}
	}
	return nil
}
