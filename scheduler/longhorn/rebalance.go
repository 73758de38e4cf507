package longhorn

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Move reasons.
const (
	MoveZoneBalance  = "zone-balance"
	MoveNodeBalance  = "node-balance"
	MoveDiskPressure = "disk-pressure"
)

// Location is a node and a disk (by its name in the node's spec.disks).
type Location struct {
	Node string `json:"node"`
	Disk string `json:"disk"`
}

// Move is one replica moved from one disk to another: Longhorn creates the
// replacement replica at To, rebuilds it, then deletes the one at From.
type Move struct {
	Volume  string   `json:"volume"`
	Replica string   `json:"replica"`
	From    Location `json:"from"`
	To      Location `json:"to"`
	Reason  string   `json:"reason"`
}

// RebalanceOptions configures [Rebalance], [RebalanceUntilStable] and
// [PlanRebalance]. A nil *RebalanceOptions, like the zero value of each
// field, means the defaults.
type RebalanceOptions struct {
	// Now is the time replenishment waits are measured against (see
	// [PlaceOptions.Now]).
	Now time.Time
	// MaxPasses bounds [RebalanceUntilStable]; 0 means 10,000. Reaching it
	// returns [ErrNotStable].
	MaxPasses int
	// UntilStable makes [PlanRebalance] plan passes until one moves
	// nothing (up to MaxPasses).
	UntilStable bool

	checkChoice func(*volCtx, *request, int) // test hook
}

// Validate reports options that cannot be used, naming the field.
func (o *RebalanceOptions) Validate() error {
	if o.MaxPasses < 0 {
		return fmt.Errorf("%w: MaxPasses %d is negative (0: the default, 10,000)", ErrInvalidOptions, o.MaxPasses)
	}
	return nil
}

// with returns a copy of o (the defaults when nil) with UntilStable
// set as asked, after checking it.
func (o *RebalanceOptions) with(untilStable bool) (*RebalanceOptions, error) {
	c := RebalanceOptions{}
	if o != nil {
		c = *o
	}
	c.UntilStable = untilStable
	return &c, c.Validate()
}

// Rebalance plans one pass of the auto-balancer over c: at most one move per
// volume (zone or node balancing, then the disk-pressure move), applied to
// a simulation of the cluster as they are decided so that later decisions
// of the pass see earlier ones. It does not modify c. [PlanRebalance] also
// says why disks under pressure gave up nothing.
// A nil opts means the defaults.
func Rebalance(c *Cluster, opts *RebalanceOptions) ([]Move, error) {
	opts, err := opts.with(false)
	if err != nil {
		return nil, err
	}
	p, err := PlanRebalance(c, opts)
	if err != nil {
		return nil, err
	}
	if len(p.Passes) == 0 {
		return []Move{}, nil
	}
	return p.Passes[0], nil
}

// RebalanceUntilStable plans passes, applying each pass's moves to the
// simulated cluster, until a pass moves nothing, and returns every pass that
// moved something. A replica never returns to a disk it left. If the pass
// limit is reached it returns the passes planned with a [*NotStableError].
// A nil opts means the defaults.
func RebalanceUntilStable(c *Cluster, opts *RebalanceOptions) ([][]Move, error) {
	opts, err := opts.with(true)
	if err != nil {
		return nil, err
	}
	p, err := PlanRebalance(c, opts)
	if p == nil {
		return nil, err
	}
	return p.Passes, err
}

// RebalancePlan is the result of [PlanRebalance]: the passes that moved
// something, and the disks under pressure that gave up no replica in the
// last pass planned (with --until-stable, the pass that moved nothing:
// what stays as it is).
type RebalancePlan struct {
	Passes [][]Move   `json:"passes"`
	Held   []HeldDisk `json:"held"`
	// Threshold is the disk-pressure setting, for [RebalancePlan.Text].
	Threshold int64 `json:"-"`
}

// PlanRebalance plans one pass, or with opts.UntilStable every pass until
// one moves nothing, and explains the disks under pressure that keep their
// replicas. When the pass limit is reached it returns the plan of every
// pass computed together with a [*NotStableError].
// A nil opts means the defaults.
func PlanRebalance(c *Cluster, opts *RebalanceOptions) (*RebalancePlan, error) {
	opts, err := prepare(c, opts)
	if err != nil {
		return nil, err
	}
	limit := 1
	if opts.UntilStable {
		limit = opts.MaxPasses
		if limit == 0 {
			limit = 10000
		}
	}
	w := newWorld(c, opts.Now)
	w.checkChoice = opts.checkChoice
	p := &RebalancePlan{Passes: [][]Move{}, Threshold: c.Settings.ReplicaAutoBalanceDiskPressurePercentage}
	for range limit {
		moves := w.pass()
		if len(moves) == 0 {
			break
		}
		p.Passes = append(p.Passes, moves)
	}
	p.Held = slices.Clone(w.held)
	if p.Held == nil {
		p.Held = []HeldDisk{}
	}
	if opts.UntilStable && len(p.Passes) == limit {
		// One more pass says whether the limit cut the plan short, and
		// which replicas were still moving.
		if extra := w.pass(); len(extra) > 0 {
			return p, &NotStableError{Passes: limit, Next: extra}
		}
		p.Held = slices.Clone(w.held)
	}
	return p, nil
}

// NotStableError is returned when --until-stable reaches its pass limit:
// Next holds the moves the pass after the limit would still make (their
// replicas and the disks they leave).
type NotStableError struct {
	Passes int
	Next   []Move
}

func (e *NotStableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "after %d passes, pass %d still moves %d replica(s): ", e.Passes, e.Passes+1, len(e.Next))
	const show = 10
	for i, m := range e.Next {
		if i == show {
			fmt.Fprintf(&b, ", and %d more", len(e.Next)-show)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s from %s %s (%s)", m.Replica, m.From.Node, m.From.Disk, m.Reason)
	}
	b.WriteString(": ")
	b.WriteString(ErrNotStable.Error())
	return b.String()
}

func (e *NotStableError) Unwrap() error { return ErrNotStable }

// balanced describes the replicas that auto-balance counts for one volume.
type balanced struct {
	reps      []int // running replicas on ready nodes
	nodeCount map[int]int
	zoneCount map[string]int
	open      *openSet // nodes a replica of the volume may go to (gate and tags)
}

// openSet is the set of nodes that pass the node gate and one node
// selector. Neither changes while a plan is made, so the set is computed
// once per selector and shared by every volume that has it: balancing needs
// only membership and the per-zone counts, never a walk over every node.
type openSet struct {
	member []bool         // per node
	count  int            // nodes in the set
	zones  map[string]int // nodes in the set per zone
}

// openNodes returns the open set of volume vi's node selector.
func (w *world) openNodes(vi int) *openSet {
	v := w.c.Volumes[vi]
	key := strings.Join(v.NodeSelector, "\x00")
	if len(v.NodeSelector) > 0 {
		key = "=" + key // distinct from the empty selector
	}
	if o, ok := w.openBySel[key]; ok {
		return o
	}
	o := &openSet{member: make([]bool, len(w.c.Nodes)), zones: map[string]int{}}
	vc := volCtx{w: w, v: v}
	for n, node := range w.c.Nodes {
		if w.nodeReason[n] == "" && vc.volumeNodeReason(n) == "" {
			o.member[n] = true
			o.count++
			o.zones[node.Zone]++
		}
	}
	if w.openBySel == nil {
		w.openBySel = map[string]*openSet{}
	}
	w.openBySel[key] = o
	return o
}

// balanceState returns the volume's counted replicas, or ok=false when the
// volume is not one auto-balance acts on: not healthy, or not exactly its
// desired number of running replicas, or one of them is being evicted.
func (w *world) balanceState(vi int) (b balanced, ok bool) {
	v := w.c.Volumes[vi]
	if v.Deleting || v.Robustness != "healthy" || v.NumberOfReplicas == 0 {
		return b, false
	}
	for _, r := range w.c.volReps[vi] {
		rep := w.c.Replicas[r]
		n := w.repNode[r]
		if n < 0 || rep.Deleting || rep.FailedAt != "" || !w.c.Nodes[n].Ready {
			continue
		}
		if rep.CurrentState != "" && rep.CurrentState != "running" {
			continue
		}
		if rep.EvictionRequested {
			return b, false
		}
		if b.nodeCount == nil {
			b.nodeCount, b.zoneCount = make(map[int]int, 4), make(map[string]int, 4)
		}
		b.reps = append(b.reps, r)
		b.nodeCount[n]++
		b.zoneCount[w.c.Nodes[n].Zone]++
	}
	if len(b.reps) != v.NumberOfReplicas {
		return b, false
	}
	b.open = w.openNodes(vi)
	return b, true
}

// openWithout reports whether an open node holds none of the volume's
// replicas.
func (b *balanced) openWithout() bool {
	used := 0
	for n := range b.nodeCount {
		if b.open.member[n] {
			used++
		}
	}
	return b.open.count > used
}

// openZoneWithout reports whether a zone with an open node holds none of
// the volume's replicas.
func (b *balanced) openZoneWithout() bool {
	for z := range b.open.zones {
		if b.zoneCount[z] == 0 {
			return true
		}
	}
	return false
}

// pickSource chooses which of reps moves: the one on the fullest disk (least
// available bytes, compared as integers), then by name.
func (w *world) pickSource(reps []int) int {
	best := -1
	for _, r := range reps {
		if best < 0 || w.avail[w.repDisk[r]] < w.avail[w.repDisk[best]] ||
			(w.avail[w.repDisk[r]] == w.avail[w.repDisk[best]] && w.c.Replicas[r].Name < w.c.Replicas[best].Name) {
			best = r
		}
	}
	return best
}

// target places replica r of volume vi anew (as if it were gone) on a node
// allowed by allow, with every placement rule, or returns -1.
func (w *world) target(vi, r int, allow func(int) bool) int {
	vc := w.volume(vi, r)
	req := newRequest()
	req.allow = allow
	req.rep = r
	req.excludeDisk = w.repDisk[r]
	return vc.choose(&req)
}

func (w *world) apply(r, d int, reason string) Move {
	from := w.repDisk[r]
	m := Move{
		Volume:  w.c.Volumes[w.c.repVol[r]].Name,
		Replica: w.c.Replicas[r].Name,
		From:    Location{Node: w.c.Nodes[w.c.disks[from].node].Name, Disk: w.c.disks[from].Name},
		To:      Location{Node: w.c.Nodes[w.c.disks[d].node].Name, Disk: w.c.disks[d].Name},
		Reason:  reason,
	}
	w.move(r, d)
	return m
}

// argmax returns the key with the largest count, ties broken by the
// smallest key.
func argmax[K int | string](counts map[K]int, less func(a, b K) bool) (K, int) {
	var best K
	bc := -1
	for k, c := range counts {
		if c > bc || (c == bc && less(k, best)) {
			best, bc = k, c
		}
	}
	return best, bc
}

func (w *world) nodeLess(a, b int) bool { return w.c.Nodes[a].Name < w.c.Nodes[b].Name }
func stringLess(a, b string) bool       { return a < b }

// balanceMove is section 1.6 for one volume: least-effort zone, then node,
// then (best-effort) node counts. Every move strictly improves the volume's
// (distinct zones, distinct nodes, zone spread, node spread), taken in that
// order, and never worsens an earlier term, so balancing ends.
func (w *world) balanceMove(vi int, mode string, b balanced) (Move, bool) {
	desired := w.c.Volumes[vi].NumberOfReplicas
	zoneOf := func(n int) string { return w.c.Nodes[n].Zone }
	on := func(pred func(r int) bool) []int {
		var out []int
		for _, r := range b.reps {
			if pred(r) {
				out = append(out, r)
			}
		}
		return out
	}
	// Least-effort, zones: a zone with no replica exists while fewer zones
	// than replicas are used. The unused zones are those with an open node
	// and no replica.
	if len(b.zoneCount) < desired && b.openZoneWithout() {
		z, _ := argmax(b.zoneCount, stringLess)
		r := w.pickSource(on(func(r int) bool { return zoneOf(w.repNode[r]) == z }))
		unused := func(n int) bool { z := zoneOf(n); return b.zoneCount[z] == 0 && b.open.zones[z] > 0 }
		if d := w.target(vi, r, unused); d >= 0 {
			return w.apply(r, d, MoveZoneBalance), true
		}
	}
	// Least-effort, nodes: the unused nodes are the open ones with no
	// replica.
	if len(b.nodeCount) < desired && b.openWithout() {
		src, _ := argmax(b.nodeCount, w.nodeLess)
		r := w.pickSource(on(func(r int) bool { return w.repNode[r] == src }))
		unused := func(n int) bool { return b.open.member[n] && b.nodeCount[n] == 0 }
		if d := w.target(vi, r, unused); d >= 0 {
			return w.apply(r, d, MoveNodeBalance), true
		}
	}
	if mode != AutoBalanceBestEffort {
		return Move{}, false
	}
	// Best-effort, nodes: extras = replicas − 1 per owner; move when the
	// most and least loaded owners differ by 2 or more, to a least-loaded
	// owner in the same zone or in a zone with fewer replicas than the
	// source's (so zone spread never worsens). The owners are the nodes
	// with a replica and the open nodes (with 0).
	src, hi, lo := spread(b.nodeCount, w.nodeLess, b.openWithout())
	if hi-lo >= 2 {
		srcZone := b.zoneCount[zoneOf(src)]
		allow := func(n int) bool {
			c, ok := b.nodeCount[n]
			ok = ok || b.open.member[n]
			return ok && c == lo && (zoneOf(n) == zoneOf(src) || b.zoneCount[zoneOf(n)] <= srcZone-1)
		}
		r := w.pickSource(on(func(r int) bool { return w.repNode[r] == src }))
		if d := w.target(vi, r, allow); d >= 0 {
			return w.apply(r, d, MoveNodeBalance), true
		}
	}
	return Move{}, false
}

// spread is best-effort balancing's measure over owners (nodes or zones):
// the most loaded owner in counts (ties by less) and its count, and the
// least count, 0 when an open owner holds none (openEmpty).
func spread[K int | string](counts map[K]int, less func(a, b K) bool, openEmpty bool) (src K, hi, lo int) {
	src, hi = argmax(counts, less)
	if openEmpty {
		return src, hi, 0
	}
	lo = hi
	for _, c := range counts {
		lo = min(lo, c)
	}
	return src, hi, lo
}

// zoneBestEffortMove is best-effort balancing over zones, tried after the
// disk-pressure move. The zones counted are those with a replica and those
// with an open node (with 0).
func (w *world) zoneBestEffortMove(vi int, b balanced) (Move, bool) {
	zoneOf := func(n int) string { return w.c.Nodes[n].Zone }
	srcZone, hi, lo := spread(b.zoneCount, stringLess, b.openZoneWithout())
	if hi-lo < 2 {
		return Move{}, false
	}
	inZone := map[int]int{}
	for n, c := range b.nodeCount {
		if zoneOf(n) == srcZone {
			inZone[n] = c
		}
	}
	src, srcCount := argmax(inZone, w.nodeLess)
	allow := func(n int) bool {
		z := zoneOf(n)
		c, ok := b.zoneCount[z]
		ok = ok || b.open.zones[z] > 0
		return ok && c == lo && (srcCount >= 2 || b.nodeCount[n] == 0)
	}
	var reps []int
	for _, r := range b.reps {
		if w.repNode[r] == src {
			reps = append(reps, r)
		}
	}
	r := w.pickSource(reps)
	if d := w.target(vi, r, allow); d >= 0 {
		return w.apply(r, d, MoveZoneBalance), true
	}
	return Move{}, false
}

// pass plans and applies one pass.
func (w *world) pass() []Move {
	c := w.c
	w.held = w.held[:0]
	moves := []Move{}
	moved := make([]bool, len(c.Volumes))
	states := make([]balanced, len(c.Volumes))
	eligible := make([]bool, len(c.Volumes))
	modes := make([]string, len(c.Volumes))
	for vi, v := range c.Volumes {
		modes[vi] = effectiveAutoBalance(v, &c.Settings)
		if modes[vi] == AutoBalanceDisabled {
			continue
		}
		states[vi], eligible[vi] = w.balanceState(vi)
		if !eligible[vi] {
			continue
		}
		if m, ok := w.balanceMove(vi, modes[vi], states[vi]); ok {
			moves = append(moves, m)
			moved[vi] = true
		}
	}
	// Disk pressure (1.5): on every schedulable node, every pressured disk
	// may give up its first replica by name to another disk of the node,
	// if moving it lowers the disk's used share (a replica with nothing
	// written frees nothing, and moving it would only make another pass).
	// A pressured disk that gives up nothing is recorded with the reason.
	if c.Settings.ReplicaAutoBalanceDiskPressurePercentage != 0 {
		onDisk := make([][]int, len(c.disks))
		for r := range c.Replicas {
			if d := w.repDisk[r]; d >= 0 && !c.Replicas[r].Deleting && c.Volumes[c.repVol[r]].Robustness == "healthy" {
				onDisk[d] = append(onDisk[d], r) // replicas are in name order
			}
		}
		for n, node := range c.Nodes {
			if w.nodeReason[n] != "" {
				continue
			}
			for _, disk := range node.Disks {
				d := disk.idx
				if len(onDisk[d]) == 0 || !w.underPressure(d) {
					continue
				}
				if len(onDisk[d]) == 0 {
					w.hold(d, -1, HeldNoReplica, nil)
					continue
				}
				r := onDisk[d][0]
				vi := c.repVol[r]
				switch {
				case moved[vi]:
					w.hold(d, r, HeldVolumeMoved, nil)
					continue
				case modes[vi] != AutoBalanceBestEffort:
					w.hold(d, r, HeldNotBestEffort+" (replica auto-balance is "+modes[vi]+")", nil)
					continue
				case !eligible[vi] || !slices.Contains(states[vi].reps, r):
					w.hold(d, r, HeldNotBalanced, nil)
					continue
				case !w.relieves(d, c.Volumes[vi].ActualSize):
					w.hold(d, r, HeldFreesNothing, nil)
					continue
				}
				vc := w.volume(vi, r)
				req := newRequest()
				req.pin, req.rep, req.excludeDisk, req.pressure = n, r, d, true
				if t := vc.choose(&req); t >= 0 {
					moves = append(moves, w.apply(r, t, MoveDiskPressure))
					moved[vi] = true
				} else {
					reasons := vc.reasons(&req)
					delete(reasons, ReasonNodeAffinity) // the other nodes: a pressure move stays on its node
					w.hold(d, r, HeldNoTarget, reasons)
				}
			}
		}
	}
	for vi := range c.Volumes {
		if !eligible[vi] || moved[vi] || modes[vi] != AutoBalanceBestEffort {
			continue
		}
		// Earlier moves of this pass concern other volumes; recount anyway
		// since positions are what the move is decided on.
		b, ok := w.balanceState(vi)
		if !ok {
			continue
		}
		if m, ok := w.zoneBestEffortMove(vi, b); ok {
			moves = append(moves, m)
			moved[vi] = true
		}
	}
	return moves
}
