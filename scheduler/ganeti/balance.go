package ganeti

import (
	"fmt"
	"math"
	"slices"
)

// BalanceOptions configures Balance. The zero value is not hbal's default;
// use DefaultBalanceOptions.
type BalanceOptions struct {
	// MinGain and MinGainLimit are hbal's --min-gain and --min-gain-limit:
	// a step is taken only if it improves the score, and, once the score
	// is at most MinGainLimit, only if it improves it by at least MinGain.
	MinGain      float64
	MinGainLimit float64
	// MinScore stops balancing once the score is at most this (hbal -e).
	MinScore float64
	// MaxRounds limits the number of moves; negative means no limit.
	MaxRounds int
	// NoDiskMoves allows only failovers and migrations (hbal --no-disk-moves).
	NoDiskMoves bool
	// IgnoreSoftErrors skips the soft checks (N+1, vCPU ratio, tags).
	IgnoreSoftErrors bool
	// Group names the node group to balance; it may be empty when the
	// cluster has a single group (like hbal -G).
	Group string
}

// DefaultBalanceOptions returns hbal's defaults.
func DefaultBalanceOptions() BalanceOptions {
	return BalanceOptions{MinGain: 0.01, MinGainLimit: 0.1, MinScore: 1e-9, MaxRounds: -1}
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
func Balance(c *Cluster, opts BalanceOptions) (*BalanceResult, error) {
	s, err := Load(c)
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
	for opts.MaxRounds < 0 || len(res.Moves) < opts.MaxRounds {
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
	b := &balancer{s: s, filter: f}
	b.reset()
	return b
}

// reset recomputes vectors, aggregates and the exact score from the state.
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
func (b *balancer) evaluate(ii int, kind MoveKind, tdx int, force bool) (float64, bool) {
	if !b.s.applyMove(ii, kind, tdx, force, true, &b.r) {
		return 0, false
	}
	b.evals++
	var ch [3]change
	var nv [3]metricVec
	for k := 0; k < b.r.nn; k++ {
		i := b.r.idx[k]
		nv[k] = b.r.nodes[k].vector()
		ch[k] = change{old: &b.vecs[i], new: &nv[k], oldN: &b.s.nodes[i], newN: &b.r.nodes[k]}
	}
	return b.agg.estimate(ch[:b.r.nn]), true
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

// step performs one hbal balancing step: the first strictly best move in
// Ganeti's scan order, if it satisfies the gain rules.
func (b *balancer) step(minGain, minGainLimit float64, force, noDiskMoves bool) (PlannedMove, bool) {
	s := b.s
	b.cands = b.cands[:0]
	best := math.Inf(1)
	try := func(ii int, kind MoveKind, tdx int) {
		est, ok := b.evaluate(ii, kind, tdx, force)
		if !ok || !(est <= best+estimateWindow) {
			return
		}
		b.cands = append(b.cands, cand{ii: int32(ii), tdx: int32(tdx), kind: kind, est: est})
		if est < best {
			best = est
		}
	}
	var src, tgt nodeState
	var srcVec, tgtVec metricVec
	for ii := range s.insts {
		in := &s.insts[ii]
		if !in.movable || !in.autoBalance || !b.filter.allows(in) {
			continue
		}
		mt := in.tmpl.Mirror()
		if mt == MirrorNone {
			continue
		}
		useSec := in.sNode >= 0 && !s.nodes[in.sNode].offline
		srcReady := false
		if mt == MirrorInternal && useSec {
			try(ii, Failover, -1)
		}
		for _, tdx := range b.online {
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
					srcReady = true
				}
				op := &s.nodes[in.pNode]
				if !migrationOK(op, &s.nodes[tdx]) {
					continue
				}
				tgt = s.nodes[tdx]
				if !tgt.addPri(in, op.offline || force) {
					continue
				}
				b.evals++
				tgtVec = tgt.vector()
				ch := [2]change{
					{old: &b.vecs[in.pNode], new: &srcVec, oldN: op, newN: &src},
					{old: &b.vecs[tdx], new: &tgtVec, oldN: &s.nodes[tdx], newN: &tgt},
				}
				est := b.agg.estimate(ch[:])
				if est <= best+estimateWindow {
					b.cands = append(b.cands, cand{ii: int32(ii), tdx: int32(tdx), kind: Migrate, est: est})
					if est < best {
						best = est
					}
				}
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
