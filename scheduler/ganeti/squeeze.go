package ganeti

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// MoveMode selects which instances Squeeze may move while balancing.
type MoveMode int

// Move modes.
const (
	// MoveExternal moves only externally mirrored instances (ext, rbd,
	// sharedfile, blockdev, gluster): the cheap moves the HSqueeze design
	// has in mind. This is the default.
	MoveExternal MoveMode = iota
	// MoveDRBD also moves DRBD instances (failover and disk replacement).
	MoveDRBD
	// MoveAll moves every instance hbal would move (movable and
	// auto-balanced); this is exactly what Ganeti's hsqueeze does.
	MoveAll
)

func (m MoveMode) filter() moveFilter {
	switch m {
	case MoveDRBD:
		return moveDRBD
	case MoveAll:
		return moveAll
	default:
		return moveExternal
	}
}

// SqueezeOptions configures Squeeze. A nil *SqueezeOptions, and the zero
// value of each field, mean hsqueeze's defaults, except for the move mode
// (see MoveMode) and the resource factors, where 0 is a real value: they
// take it only with MinimalSet or TargetSet.
type SqueezeOptions struct {
	// MinimalResources (hsqueeze --minimal-resources, default 2.0): below
	// room for this many standard instances on some node, power nodes up.
	MinimalResources float64
	// TargetResources (hsqueeze --target-resources, default 2.0): the room
	// every node must keep after nodes are powered down.
	TargetResources float64
	// Moves selects the instances that may move.
	Moves MoveMode
	// Set tells that MinimalResources/TargetResources were given (so that
	// 0 can be requested); when false, zero values mean 2.0.
	MinimalSet, TargetSet bool
	// Search selects the strategy (see Search); the default, SearchAuto,
	// takes hsqueeze's decisions unless many DRBD instances may move.
	Search Search
	// ExactLimit is the largest movable DRBD instances × online nodes
	// product SearchAuto searches exactly (with SearchBounded; default
	// 750,000: about 1,200 movable DRBD instances on 500 nodes, a quarter
	// of 5,000 instances, are decided in under a minute of CPU). PrunedLimit is the largest instances × online nodes product
	// it searches with pruning beyond that (default 500,000).
	ExactLimit, PrunedLimit int
	// TopK is the number of target nodes per instance shape the pruned
	// and incremental searches try (default 4).
	TopK int
}

// Search is the search strategy of Squeeze.
type Search int

// Search strategies.
const (
	// SearchAuto is SearchBounded (hsqueeze's decisions) unless the DRBD
	// moves it would score in full (movable DRBD instances × online nodes)
	// exceed ExactLimit; then it is pruned up to PrunedLimit instance ×
	// node pairs and incremental beyond, both approximate.
	SearchAuto Search = iota
	// SearchExact runs hsqueeze's algorithm: every candidate set is
	// balanced from the initial state trying every move.
	SearchExact
	// SearchPruned balances every candidate set from the initial state too,
	// but each balancing step tries an instance only on the TopK nodes
	// ranked best for its shape (plus the nodes changed since the ranking).
	// It took hsqueeze's decision on every cluster of the differential
	// suite; it is not proven to in general.
	SearchPruned
	// SearchIncremental is SearchPruned that also reuses work between
	// candidate sets: each one continues from the balanced state of the
	// last accepted set instead of starting over. It is the only strategy
	// fast enough for thousands of instances, and the least faithful: on
	// the differential suite it took hsqueeze's decision in about 85% of
	// the clusters (freeing a different set of nodes in the others).
	SearchIncremental
	// SearchBounded is SearchExact without scoring the migrations that a
	// lower bound on their score rules out (see scanBounded): the same
	// moves, step by step, as SearchExact, so hsqueeze's decision.
	SearchBounded
)

func (s Search) String() string {
	switch s {
	case SearchExact:
		return "exact"
	case SearchPruned:
		return "pruned"
	case SearchIncremental:
		return "incremental"
	case SearchBounded:
		return "bounded"
	}
	return "auto"
}

func (o *SqueezeOptions) setDefaults() {
	if !o.MinimalSet && o.MinimalResources == 0 {
		o.MinimalResources = 2.0
	}
	if !o.TargetSet && o.TargetResources == 0 {
		o.TargetResources = 2.0
	}
	if o.ExactLimit == 0 {
		o.ExactLimit = 750000
	}
	if o.PrunedLimit == 0 {
		o.PrunedLimit = 500000
	}
	if o.TopK == 0 {
		o.TopK = 4
	}
}

// Validate reports options that cannot be used, naming the field.
func (o *SqueezeOptions) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"MinimalResources", o.MinimalResources}, {"TargetResources", o.TargetResources}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v > 1e6 {
			return fmt.Errorf("%w: %s %v must be a finite number from 0 to 1e6", ErrOptions, f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"ExactLimit", o.ExactLimit}, {"PrunedLimit", o.PrunedLimit}, {"TopK", o.TopK}} {
		if f.v < 0 {
			return fmt.Errorf("%w: %s %d is negative (0: the default)", ErrOptions, f.name, f.v)
		}
	}
	if o.Moves < MoveExternal || o.Moves > MoveAll {
		return fmt.Errorf("%w: Moves %d is not a MoveMode", ErrOptions, o.Moves)
	}
	if o.Search < SearchAuto || o.Search > SearchBounded {
		return fmt.Errorf("%w: Search %d is not a Search", ErrOptions, o.Search)
	}
	return nil
}

// Squeeze actions.
const (
	ActionOffline = "offline"
	ActionOnline  = "online"
	ActionNone    = "none"
)

// SqueezeMove is a move of the squeeze plan.
type SqueezeMove struct {
	Instance string `json:"instance"`
	From     string `json:"from"`
	To       string `json:"to"`
	Kind     string `json:"kind"`
}

// SqueezeResult is the decision of Squeeze.
type SqueezeResult struct {
	Action      string        `json:"action"`
	Nodes       []string      `json:"nodes"`
	Moves       []SqueezeMove `json:"moves"`
	Commands    []string      `json:"commands"`
	ScoreBefore float64       `json:"score_before"`
	ScoreAfter  float64       `json:"score_after"`
	// Notes are hsqueeze's verbose remarks (e.g. that onlining every
	// standby node is not enough).
	Notes []string `json:"notes,omitempty"`
	// OfflineCandidates and OnlineCandidates are the candidate lists in
	// hsqueeze's order.
	OfflineCandidates []string `json:"offline_candidates"`
	OnlineCandidates  []string `json:"online_candidates"`
	// Search is the strategy used.
	Search Search `json:"-"`
	// Stats describes the work done.
	Stats SqueezeStats `json:"-"`
}

// SqueezeStats counts the work of a Squeeze call.
type SqueezeStats struct {
	Balances      int // full balancing runs
	Pruned        int // candidate sets rejected by the resource totals
	Steps         int // balancing steps taken
	Evaluations   int // candidate moves scored incrementally
	ExactRescores int // candidate moves re-scored from scratch
}

// Squeeze decides which nodes to power down (or up), as hsqueeze does.
// A nil opts means the defaults.
func Squeeze(c *Cluster, opts *SqueezeOptions) (*SqueezeResult, error) {
	opts, base, err := prepare(c, opts)
	if err != nil {
		return nil, err
	}
	sq := &squeezer{base: base, filter: opts.Moves.filter()}
	search := autoSearch(base, sq.filter, opts)
	switch search {
	case SearchPruned:
		sq.topK = opts.TopK
	case SearchIncremental:
		sq.topK = opts.TopK
		sq.incremental = true
	case SearchBounded:
		sq.bounded = true
	}
	sq.search = search
	return sq.run(opts)
}

// autoSearch is the search Squeeze uses: opts.Search, or for SearchAuto
// the one ExactLimit and PrunedLimit pick for the state.
func autoSearch(base *State, f moveFilter, opts *SqueezeOptions) Search {
	if opts.Search != SearchAuto {
		return opts.Search
	}
	online := 0
	for i := range base.nodes {
		if !base.nodes[i].offline {
			online++
		}
	}
	size := len(base.insts) * online
	drbd := 0 // movable DRBD instances (see ExactLimit)
	for i := range base.insts {
		in := &base.insts[i]
		if in.tmpl.Mirror() == MirrorInternal && in.movable && in.autoBalance && f.allows(in) {
			drbd++
		}
	}
	switch {
	case drbd*online <= opts.ExactLimit:
		return SearchBounded
	case size <= opts.PrunedLimit:
		return SearchPruned
	default:
		return SearchIncremental
	}
}

type squeezer struct {
	base        *State
	filter      moveFilter
	stats       SqueezeStats
	topK        int  // pruned scan (0: every move)
	incremental bool // continue from the last accepted state
	bounded     bool // skip the migrations a bound rules out
	search      Search
}

// reserve is hsqueeze's instanceFromSpecAndFactor.
func reserve(f float64, std ISpec) instState {
	fl := func(x int) int { return int(math.Floor(f * float64(x))) }
	return instState{mem: fl(std.MemorySize), vcpus: fl(std.CPUCount), spindleUse: fl(std.SpindleUse),
		status: "running", pNode: -1, sNode: -1, util: baseUtil, movable: true, tmpl: Ext, spindles: 0}
}

func hasStandbyTag(n *Node) bool {
	for _, t := range n.Tags {
		if strings.HasPrefix(t, TagStandbyPrefix) {
			return true
		}
	}
	return false
}

// capacityFor is hsqueeze's allNodesCapacityFor: every node, online or
// not, accepts the instance as a new primary under the strict checks.
func capacityFor(s *State, in *instState) bool {
	for i := range s.nodes {
		n := s.nodes[i]
		if !n.addPri(in, false) {
			return false
		}
	}
	return true
}

func allOnOnline(s *State) bool {
	for i := range s.insts {
		if s.nodes[s.insts[i].pNode].offline {
			return false
		}
	}
	return true
}

func (s *State) clone() *State {
	out := *s
	out.nodes = append([]nodeState(nil), s.nodes...)
	out.insts = append([]instState(nil), s.insts...)
	return &out
}

type balanceRun struct {
	s     *State
	moves []PlannedMove
	score float64
	start float64
}

// setAndBalance marks nodes offline (or online) in a copy of from and
// balances like hsqueeze (minimum gain 0, until no move strictly improves
// the score).
func (sq *squeezer) setAndBalance(from *State, nodes []int, offline bool) balanceRun {
	s := from.clone()
	for _, i := range nodes {
		s.nodes[i].offline = offline
	}
	b := newBalancer(s, sq.filter)
	b.topK = sq.topK
	b.bounded = sq.bounded
	run := balanceRun{s: s, start: b.cur}
	for {
		m, ok := b.step(0, 0, false, false)
		if !ok {
			break
		}
		run.moves = append(run.moves, m)
	}
	run.score = b.cur
	sq.stats.Balances++
	sq.stats.Steps += b.steps
	sq.stats.Evaluations += b.evals
	sq.stats.ExactRescores += b.exacts
	return run
}

// feasible checks resource totals that any final placement must satisfy for
// offlining (or onlining) nodes to succeed: every instance on an online node
// and every online node able to take in the reserve instance. It only
// returns false when success is impossible whatever the balancer does.
func (sq *squeezer) feasible(nodes []int, offline bool, res *instState) bool {
	s := sq.base
	off := make([]bool, len(s.nodes))
	for i := range s.nodes {
		off[i] = s.nodes[i].offline
	}
	for _, i := range nodes {
		off[i] = offline
	}
	freeMem, needMem := 0, 0
	usedCPU, capCPU := 0, 0
	cpuLimited := true
	for i := range s.nodes {
		if off[i] {
			continue
		}
		n := &s.nodes[i]
		freeMem += n.cur.fMem
		if res.usesMemory() {
			needMem += res.mem + 1
		}
		usedCPU += n.cur.uCPU
		if n.vcpuRatio < 0 {
			cpuLimited = false
		} else {
			capCPU += cpuCap(n, res)
		}
	}
	for i := range s.insts {
		in := &s.insts[i]
		if in.forthcoming || !off[in.pNode] {
			continue
		}
		// Must move onto an online node.
		if !s.insts[i].movable || !s.insts[i].autoBalance || !sq.filter.allows(in) || in.tmpl.Mirror() == MirrorNone {
			return false
		}
		if in.usesMemory() {
			freeMem -= in.mem
		}
		if in.notOffline() {
			usedCPU += in.vcpus
		}
	}
	if freeMem < needMem {
		return false
	}
	if cpuLimited && usedCPU > capCPU {
		return false
	}
	return true
}

// cpuCap is the largest used-vCPU count u for which a node still accepts
// the reserve instance ((u+vcpus)/tCpu <= ratio).
func cpuCap(n *nodeState, res *instState) int {
	add := 0
	if res.notOffline() {
		add = res.vcpus
	}
	lim := n.vcpuRatio * n.tCPU
	if !(lim < 1<<40) || !(lim > -(1 << 40)) {
		return 1 << 40 // no practical limit (or nonsense input): never prune on it
	}
	ok := func(u int) bool { return !(n.vcpuRatio < float64(u+add)/n.tCPU) }
	u := int(math.Floor(lim)) - add
	// float64 rounding can put the boundary one off either way.
	for i := 0; i < 64 && ok(u+1); i++ {
		u++
	}
	for i := 0; i < 64 && !ok(u); i++ {
		u--
	}
	return u
}

// succeeds balances from (a copy of) from with nodes set offline (or
// online) and reports whether hsqueeze's conditions hold afterwards.
func (sq *squeezer) succeeds(from *State, nodes []int, offline bool, res *instState) (balanceRun, bool) {
	if !sq.feasible(nodes, offline, res) {
		sq.stats.Pruned++
		return balanceRun{}, false
	}
	run := sq.setAndBalance(from, nodes, offline)
	return run, allOnOnline(run.s) && capacityFor(run.s, res)
}

func (sq *squeezer) run(opts *SqueezeOptions) (*SqueezeResult, error) {
	s := sq.base
	c := s.c
	res := &SqueezeResult{Nodes: []string{}, Moves: []SqueezeMove{}, Commands: []string{}, Search: sq.search}
	var offCand, onCand []int
	for i := range s.nodes {
		n := &s.nodes[i]
		if !n.offline && !n.master && n.nSec == 0 && onlyExternal(s, i) {
			offCand = append(offCand, i)
		}
		if n.offline && hasStandbyTag(&c.Nodes[i]) {
			onCand = append(onCand, i)
		}
	}
	sort.SliceStable(offCand, func(a, b int) bool { return s.nodes[offCand[a]].nPri > s.nodes[offCand[b]].nPri })
	for _, i := range offCand {
		res.OfflineCandidates = append(res.OfflineCandidates, s.nodeName(i))
	}
	for _, i := range onCand {
		res.OnlineCandidates = append(res.OnlineCandidates, s.nodeName(i))
	}
	target := reserve(opts.TargetResources, c.Policy.Std)
	minimal := reserve(opts.MinimalResources, c.Policy.Std)
	res.ScoreBefore = newBalancer(s.clone(), sq.filter).cur
	res.ScoreAfter = res.ScoreBefore

	if !capacityFor(s, &minimal) {
		res.Action = ActionOnline
		var chosen []int
		var run balanceRun
		found := false
		from := s
		var done []PlannedMove // incremental search: moves of earlier prefixes
		var whole balanceRun   // the balance of the whole list, if it ran
		for k := 0; k <= len(onCand); k++ {
			// Setting the whole prefix is idempotent on a state that has
			// part of it online already (incremental search).
			r, ok := sq.succeeds(from, onCand[:k], false, &minimal)
			if ok {
				chosen, run, found = onCand[:k], r, true
				break
			}
			if k == len(onCand) {
				whole = r
			}
			if sq.incremental && r.s != nil {
				from = r.s
				done = append(done, r.moves...)
			}
		}
		if !found {
			chosen = onCand
			res.Notes = append(res.Notes, "Onlining all nodes will not yield enough capacity")
			if whole.s != nil && !sq.incremental {
				// The same computation as the last try: the whole list
				// onlined in the initial state and balanced.
				run = whole
			} else {
				run = sq.setAndBalance(from, chosen, false)
			}
		}
		run.moves = append(done, run.moves...)
		for _, i := range chosen {
			res.Nodes = append(res.Nodes, s.nodeName(i))
		}
		sq.finish(res, run, chosen, false)
		res.Stats = sq.stats
		return res, nil
	}

	var kept []int // in candidate-list order
	var last balanceRun
	from := s
	var done []PlannedMove // incremental search: moves of accepted sets
	for k := len(offCand) - 1; k >= 0; k-- {
		set := append([]int{offCand[k]}, kept...)
		r, ok := sq.succeeds(from, set, true, &target)
		if ok {
			kept, last = set, r
			if sq.incremental {
				from = r.s
				done = append(done, r.moves...)
				last.moves = done
			}
		}
	}
	if len(kept) == 0 {
		res.Action = ActionNone
		res.Stats = sq.stats
		return res, nil
	}
	res.Action = ActionOffline
	for _, i := range kept {
		res.Nodes = append(res.Nodes, s.nodeName(i))
	}
	sq.finish(res, last, kept, true)
	res.Stats = sq.stats
	return res, nil
}

func onlyExternal(s *State, ni int) bool {
	for i := range s.insts {
		in := &s.insts[i]
		if in.pNode == ni && !in.forthcoming && in.usesLocal() {
			return false
		}
	}
	return true
}

// finish fills in moves, commands and the final score (hsqueeze -C form).
func (sq *squeezer) finish(res *SqueezeResult, run balanceRun, nodes []int, offline bool) {
	s := sq.base
	res.ScoreAfter = run.score
	for _, m := range run.moves {
		res.Moves = append(res.Moves, SqueezeMove{Instance: m.Instance, From: m.FromPrimary, To: m.ToPrimary, Kind: m.KindName})
	}
	var cmds []string
	if !offline {
		cmds = append(cmds, "echo Power Commands")
		for _, i := range nodes {
			cmds = append(cmds, "gnt-node power -f on "+s.nodeAlias(i))
		}
	}
	cmds = append(cmds, jobCommands(run.moves)...)
	if offline {
		cmds = append(cmds, "echo Tagging Commands")
		for _, i := range nodes {
			cmds = append(cmds, "gnt-node add-tags "+s.nodeAlias(i)+" "+TagStandbyAuto)
		}
		cmds = append(cmds, "echo Power Commands")
		for _, i := range nodes {
			cmds = append(cmds, "gnt-node power -f off "+s.nodeAlias(i))
		}
	}
	res.Commands = cmds
}

// jobCommands groups moves into jobsets of moves on disjoint nodes, in
// Ganeti's formatCmds layout.
func jobCommands(moves []PlannedMove) []string {
	var sets [][]PlannedMove
	var busy map[string]bool
	for _, m := range moves {
		nodes := []string{m.FromPrimary, m.FromSecondary, m.ToPrimary, m.ToSecondary}
		clash := false
		for _, n := range nodes {
			if n != "" && busy[n] {
				clash = true
			}
		}
		if len(sets) == 0 || clash {
			sets = append(sets, nil)
			busy = map[string]bool{}
		}
		sets[len(sets)-1] = append(sets[len(sets)-1], m)
		for _, n := range nodes {
			if n != "" {
				busy[n] = true
			}
		}
	}
	var out []string
	for i, set := range sets {
		out = append(out, fmt.Sprintf("echo jobset %d, %d jobs", i+1, len(set)))
		for j, m := range set {
			out = append(out, fmt.Sprintf("echo job %d/%d", i+1, j+1))
			out = append(out, m.Commands...)
		}
	}
	return out
}
