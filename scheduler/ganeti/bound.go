package ganeti

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
)

// Bounded scan: the exact step (every move of every instance is a
// candidate) without scoring every migration. The score after migrating
// instance i to node t is, for every standard-deviation metric k,
//
//	sd_k = sqrt(V_k),  V_k = V0_k + α_k(i) + β_k(t) − 2·a_k(i)·b_k(t)/n²
//
// where a, b are the changes of the metric's (shifted) sum on the source
// and the target, α(i) and β(t) collect the terms of one side only, and n
// is the number of online nodes. The cross term is at least −2·|a|·max|b|/n²,
// which is folded into α. sqrt is concave, so on the range [ulo, uhi] that
// α+β takes over all pairs it lies above its chord: sd_k ≥ L_k + σ_k·(α+β).
// The sums (linear metrics) are separable as they stand. Hence
//
//	score(i, t) ≥ K(i) + T(shape(i), t)
//
// with K and T computed once per step in O(instances + shapes × nodes).
// The instance with the least K + min T is scored first, then the others
// in order, each one's targets by increasing T, and a pair is scored only while its bound is within
// estimateWindow of the best estimate so far: a pair above that cannot be
// the best move (its estimate is above the best estimate, its exact score
// above the best exact one, by more than the estimates' rounding, which
// estimateWindow bounds). The candidates kept are then put back in Ganeti's
// scan order, so the exact re-scoring picks the same first-best move as the
// full scan.
//
// DRBD disk moves (replace-secondary, replace-and-failover, replace-primary,
// failover-and-replace) touch the instance's own nodes and the target; the
// two sides are coupled only through the N+1 reserve of the node that
// becomes secondary, which depends on what it already reserves for the new
// primary (between 0 and its largest reserve; every metric grows with it)
// and, with location tags, the location score (bounded runs only without
// tags on online nodes, so a moved instance's is 0). Each side is then an
// interval per metric (ivEntry) and the same chord gives
//
//	score(i, kind, t) >= K(i, kind) + T(shape(i), role(kind), t)
//
// with the cross term bounded by the largest |D| of the targets. Failovers
// (no target) are all scored.

// sdMask has the bits of the standard-deviation metrics.
var sdMask = func() uint32 {
	var m uint32
	for k := 0; k < nMetrics; k++ {
		if metricKinds[k] == mStdDev {
			m |= 1 << k
		}
	}
	return m
}()

// boundSlack absorbs the rounding of the bound itself.
const boundSlack = 1e-9

type boundScratch struct {
	srcD   []delta   // per instance: the source side of a migration
	alpha  []float64 // per instance × metric
	key    []float64 // per instance: K(i)
	order  []int32   // migration instances
	tOrder [][]tEntry
	tMin   []float64
	sigma  metricVec
	lo, hi metricVec // ranges of α and β, then of α+β
	bLo    metricVec
	bHi    metricVec
	absB   metricVec
	be     []bEntry // compact tc, same index
	beVer  []uint32 // node version be was built at (0: never)
	beTw   bool     // twins flag be was built with
	srcAt  []int32  // per instance: node srcD was computed on
	srcVer []uint32 // and its version (0: never)
	needed []bool   // (shape, flag) used by some instance
	hs     []int    // the needed ones
	sorted []bool   // tOrder[h] is sorted

	// DRBD moves (see drbdItem): per node, shape and role the target
	// side, built at the node's version dVer; the (instance, kind) items
	// of this step with their α; T per (shape, role) as for migrations.
	dt      []ivEntry
	dVer    []uint32
	dTw     bool // twins flag dt was built with
	items   []drbdItem
	dAlpha  []metricVec
	owns    []ivEntry // per item: the instance's own nodes
	dNeeded []bool
	dOrder  [][]tEntry
	dMin    []float64
	dSorted []bool
}

// ivEntry is one side of a DRBD move (the target, or the instance's own
// nodes) as intervals: over every peer the side's N+1 reserve can take,
// each deviation metric's shifted-sum change lies in [dlo, dhi] and its
// sum-of-squares change is at least qlo; lin is a lower bound of the
// weighted change of the sums.
type ivEntry struct {
	ok            bool
	lin           float64
	dlo, dhi, qlo metricVec
}

// drbdItem is a DRBD instance with one of its four disk moves; the target
// node is what the bound ranks.
type drbdItem struct {
	ii   int32
	kind MoveKind
	hr   int32 // 2·shape + role of the target (0: new primary, 1: new secondary)
	key  float64
}

// bEntry is a cached migration target (tc entry) reduced to what the bound
// needs: per deviation metric it changes, the change of the shifted sum and
// P = dq/n − ds²/n² (β = P − 2·s·ds/n²); and the weighted change of the sums.
type bEntry struct {
	ok  bool
	n   uint8
	k   [nMetrics]uint8
	lin float64
	ds  [nMetrics]float64
	p   [nMetrics]float64
}

func (b *balancer) compact(e *tcEntry, out *bEntry) {
	a := &b.agg
	out.ok, out.n, out.lin = e.ok, 0, 0
	if !e.ok {
		return
	}
	for m := e.d.mask; m != 0; m &= m - 1 {
		k := bits.TrailingZeros32(m)
		if metricKinds[k] != mStdDev {
			out.lin += a.w[k] * e.d.ds[k]
			continue
		}
		ds := e.d.ds[k]
		out.k[out.n] = uint8(k)
		out.ds[out.n] = ds
		out.p[out.n] = e.d.dq[k]*a.invN - ds*ds*a.invN*a.invN
		out.n++
	}
}

type tEntry struct {
	t   int32
	key float64
}

// beta is one side's part of V_k (see above) for a shifted-sum change ds and
// sum-of-squares change dq.
func (a *aggregates) beta(k int, ds, dq float64) float64 {
	return dq*a.invN - (2*a.s[k]*ds+ds*ds)*a.invN*a.invN
}

// scanBounded is scan over every instance, skipping migrations whose bound
// rules them out. Valid only without the map metric (estimate2 path) and
// without target pruning.
func (b *balancer) scanBounded(w *scanWorker, force, noDiskMoves bool) {
	s := b.s
	a := &b.agg
	bs := &b.bound
	w.reset()
	ns := len(b.shapeOf)
	nIn := len(s.insts)
	if cap(bs.srcD) < nIn {
		bs.srcD = make([]delta, nIn)
		bs.key = make([]float64, nIn)
		bs.alpha = make([]float64, nIn*nMetrics)
	}
	bs.srcD, bs.key, bs.alpha = bs.srcD[:nIn], bs.key[:nIn], bs.alpha[:nIn*nMetrics]
	if len(bs.srcVer) != nIn {
		bs.srcVer = make([]uint32, nIn)
		bs.srcAt = make([]int32, nIn)
	}
	if len(bs.be) != len(b.tc) || bs.beTw != a.twins {
		bs.be = make([]bEntry, len(b.tc))
		bs.beVer = make([]uint32, len(s.nodes))
		bs.beTw = a.twins
		clear(bs.srcVer)
	}
	for _, t := range b.online {
		if v := b.nodeVer[t] + 1; bs.beVer[t] != v {
			for h := 0; h < 2*ns; h++ {
				if b.extShape[h/2] {
					b.compact(&b.tc[t*2*ns+h], &bs.be[t*2*ns+h])
				}
			}
			bs.beVer[t] = v
		}
	}
	var sn metricVec // 2·s_k/n² per deviation metric
	for k := 0; k < nMetrics; k++ {
		sn[k] = 2 * a.s[k] * a.invN * a.invN
	}

	fbOf := func(in *instState) int {
		if s.nodes[in.pNode].offline || force {
			return 1
		}
		return 0
	}
	// The (shape, soft-check flag) pairs some instance may migrate with.
	if len(bs.needed) != 2*ns {
		bs.needed = make([]bool, 2*ns)
		bs.sorted = make([]bool, 2*ns)
	}
	clear(bs.needed)
	bs.order = bs.order[:0]
	for ii := range s.insts {
		in := &s.insts[ii]
		if !in.movable || !in.autoBalance || !b.filter.allows(in) || in.tmpl.Mirror() != MirrorExternal {
			continue
		}
		bs.needed[2*int(b.shape[ii])+fbOf(in)] = true
		bs.order = append(bs.order, int32(ii))
	}
	bs.hs = bs.hs[:0]
	for h, ok := range bs.needed {
		if ok {
			bs.hs = append(bs.hs, h)
		}
	}
	// Target side: ranges of β and of |b| over every cached entry.
	for _, k := range a.active {
		bs.bLo[k], bs.bHi[k], bs.absB[k] = 0, 0, 0
	}
	for _, t := range b.online {
		for _, h := range bs.hs {
			e := &bs.be[t*2*ns+h]
			for j := 0; j < int(e.n); j++ {
				k := e.k[j]
				v := e.p[j] - sn[k]*e.ds[j]
				bs.bLo[k] = min(bs.bLo[k], v)
				bs.bHi[k] = max(bs.bHi[k], v)
				bs.absB[k] = max(bs.absB[k], math.Abs(e.ds[j]))
			}
		}
	}
	// Source side: the exact change of removing each instance, and α with
	// the cross-term bound folded in.
	var aLo, aHi metricVec
	for _, ii32 := range bs.order {
		ii := int(ii32)
		in := &s.insts[ii]
		d := &bs.srcD[ii]
		if v := b.nodeVer[in.pNode] + 1; bs.srcVer[ii] != v || bs.srcAt[ii] != int32(in.pNode) {
			src := s.nodes[in.pNode]
			src.removePri(in)
			vec := src.vector()
			a.delta(&b.vecs[in.pNode], &vec, src.offline, d)
			bs.srcVer[ii], bs.srcAt[ii] = v, int32(in.pNode)
		}
		al := bs.alpha[ii*nMetrics : (ii+1)*nMetrics]
		for _, k := range a.active {
			if metricKinds[k] != mStdDev {
				continue
			}
			x := 0.0
			if d.mask&(1<<k) != 0 {
				x = a.beta(k, d.ds[k], d.dq[k]) - 2*math.Abs(d.ds[k])*bs.absB[k]*a.invN*a.invN
			}
			al[k] = x
			aLo[k] = min(aLo[k], x)
			aHi[k] = max(aHi[k], x)
		}
	}
	// DRBD disk moves: their own α and β ranges.
	da := b.drbdPrepare(noDiskMoves)
	// Chords.
	var lconst float64 = a.base
	for _, k := range a.active {
		if metricKinds[k] != mStdDev {
			continue
		}
		v0 := a.q[k]*a.invN - (a.s[k]*a.invN)*(a.s[k]*a.invN)
		lo, hi := aLo[k]+bs.bLo[k], aHi[k]+bs.bHi[k]
		if da.any {
			lo, hi = min(lo, da.aLo[k]+da.bLo[k]), max(hi, da.aHi[k]+da.bHi[k])
		}
		lo = max(lo, -v0)
		g := func(u float64) float64 { return math.Sqrt(max(0, v0+u)) }
		sig, l := 0.0, 0.0
		if hi > lo {
			sig = (g(hi) - g(lo)) / (hi - lo)
			l = g(lo) - sig*lo
		} else {
			l = g(lo)
			if hi < lo {
				l = 0 // every pair is below -V0: sd >= 0 is all we know
			}
		}
		bs.sigma[k] = sig
		lconst += a.w[k] * (l - a.cur[k])
	}
	// T per (shape, flag): its minimum now, the sorted list when needed.
	if len(bs.tOrder) != 2*ns {
		bs.tOrder = make([][]tEntry, 2*ns)
		bs.tMin = make([]float64, 2*ns)
	}
	for h := range bs.tMin {
		bs.tMin[h] = math.Inf(1)
		bs.sorted[h] = false
		bs.tOrder[h] = bs.tOrder[h][:0]
	}
	var ws metricVec // w_k·σ_k
	for _, k := range a.active {
		ws[k] = a.w[k] * bs.sigma[k]
	}
	for _, t := range b.online {
		for _, h := range bs.hs {
			e := &bs.be[t*2*ns+h]
			if !e.ok {
				continue
			}
			k := e.lin
			for j := 0; j < int(e.n); j++ {
				kk := e.k[j]
				k += ws[kk] * (e.p[j] - sn[kk]*e.ds[j])
			}
			bs.tOrder[h] = append(bs.tOrder[h], tEntry{t: int32(t), key: k})
			bs.tMin[h] = min(bs.tMin[h], k)
		}
	}
	// K(i) + min T: the bound over all of instance i's migrations.
	first, firstKey := -1, math.Inf(1)
	for _, ii := range bs.order {
		h := 2*int(b.shape[ii]) + fbOf(&s.insts[ii])
		k := lconst + b.sideKey(&bs.srcD[ii], bs.alpha[int(ii)*nMetrics:int(ii+1)*nMetrics])
		bs.key[ii] = k
		if k+bs.tMin[h] < firstKey {
			first, firstKey = int(ii), k+bs.tMin[h]
		}
	}

	// DRBD failovers (one per instance, no target): all of them.
	for ii := range s.insts {
		in := &s.insts[ii]
		if in.tmpl.Mirror() == MirrorInternal && in.movable && in.autoBalance && b.filter.allows(in) &&
			in.sNode >= 0 && !s.nodes[in.sNode].offline {
			if est, ok := b.evaluate(&w.r, ii, Failover, -1, force); ok {
				w.evals++
				w.record(ii, Failover, -1, est)
			}
		}
	}
	// DRBD disk moves: T per (shape, role) and K per item, as for
	// migrations.
	firstD := -1
	if da.any {
		for h := range bs.dMin {
			bs.dMin[h] = math.Inf(1)
			bs.dSorted[h] = false
			bs.dOrder[h] = bs.dOrder[h][:0]
		}
		for _, t := range b.online {
			for hr, ok := range bs.dNeeded {
				if !ok {
					continue
				}
				e := &bs.dt[t*2*ns+hr]
				if !e.ok {
					continue
				}
				k := e.lin
				for _, kk := range a.active {
					if metricKinds[kk] == mStdDev {
						k += ws[kk] * a.ivBeta(kk, e)
					}
				}
				bs.dOrder[hr] = append(bs.dOrder[hr], tEntry{t: int32(t), key: k})
				bs.dMin[hr] = min(bs.dMin[hr], k)
			}
		}
		for j := range bs.items {
			it := &bs.items[j]
			it.key += lconst
			for _, k := range a.active {
				if metricKinds[k] == mStdDev {
					it.key += ws[k] * bs.dAlpha[j][k]
				}
			}
			if it.key+bs.dMin[it.hr] < firstKey {
				firstD, firstKey = j, it.key+bs.dMin[it.hr]
			}
		}
	}
	limit := func(x float64) bool { return x-boundSlack*(1+math.Abs(x)) > w.best+estimateWindow }
	migrations := func(ii int) {
		in := &s.insts[ii]
		h := 2*int(b.shape[ii]) + fbOf(in)
		k := bs.key[ii]
		if limit(k + bs.tMin[h]) {
			return
		}
		op := &s.nodes[in.pNode]
		if !bs.sorted[h] {
			slices.SortFunc(bs.tOrder[h], func(x, y tEntry) int { return cmp.Compare(x.key, y.key) })
			bs.sorted[h] = true
		}
		for _, te := range bs.tOrder[h] {
			if limit(k + te.key) {
				break
			}
			tdx := int(te.t)
			if tdx == in.pNode || tdx == in.sNode || !migrationOK(op, &s.nodes[tdx]) {
				continue
			}
			e := &b.tc[(tdx*ns+int(b.shape[ii]))*2+h%2]
			w.evals++
			w.record(ii, Migrate, tdx, a.estimate2(&bs.srcD[ii], &e.d))
		}
	}
	disk := func(j int) {
		it := &bs.items[j]
		if limit(it.key + bs.dMin[it.hr]) {
			return
		}
		if !bs.dSorted[it.hr] {
			slices.SortFunc(bs.dOrder[it.hr], func(x, y tEntry) int { return cmp.Compare(x.key, y.key) })
			bs.dSorted[it.hr] = true
		}
		in := &s.insts[it.ii]
		if b.onBound != nil {
			// Test hook: every target's bound against its estimate.
			for _, te := range bs.dOrder[it.hr] {
				tdx := int(te.t)
				if tdx == in.pNode || tdx == in.sNode {
					continue
				}
				if est, ok := b.evaluate(&w.r, int(it.ii), it.kind, tdx, force); ok {
					b.onBound(int(it.ii), it.kind, tdx, it.key+te.key, est, &bs.owns[j], &bs.dt[tdx*2*ns+int(it.hr)])
				}
			}
		}
		for _, te := range bs.dOrder[it.hr] {
			if limit(it.key + te.key) {
				break
			}
			tdx := int(te.t)
			if tdx == in.pNode || tdx == in.sNode {
				continue
			}
			if est, ok := b.evaluate(&w.r, int(it.ii), it.kind, tdx, force); ok {
				w.evals++
				w.record(int(it.ii), it.kind, tdx, est)
			}
		}
	}
	// The most promising migration or DRBD move first, for a low best
	// estimate early; then every other one whose bound still allows it.
	if firstD >= 0 {
		disk(firstD)
	} else if first >= 0 {
		migrations(first)
	}
	for _, ii := range bs.order {
		if int(ii) != first || firstD >= 0 {
			migrations(int(ii))
		}
	}
	for j := range bs.items {
		if j != firstD {
			disk(j)
		}
	}
	// Back to Ganeti's scan order: by instance, then target (a DRBD
	// instance's failover, tdx -1, first), then a DRBD instance's moves
	// to one target in scanInst's order.
	slices.SortFunc(w.cands, func(x, y cand) int {
		if c := cmp.Compare(x.ii, y.ii); c != 0 {
			return c
		}
		if c := cmp.Compare(x.tdx, y.tdx); c != 0 {
			return c
		}
		return cmp.Compare(kindRank[x.kind], kindRank[y.kind])
	})
}

// kindRank is the order in which scanInst tries a DRBD instance's moves to
// one target.
var kindRank = [...]int{Failover: 0, Migrate: 0, ReplaceSecondary: 1, ReplaceAndFailover: 2, ReplacePrimary: 3, FailoverAndReplace: 4}

// drbdRanges are the ranges of α and β over the DRBD moves of a step.
type drbdRanges struct {
	any                bool
	aLo, aHi, bLo, bHi metricVec
}

// drbdPrepare brings the DRBD target sides up to date and computes, for
// every movable DRBD instance and each of its disk moves, the interval of
// its own nodes' change (bs.items, bs.dAlpha holding α with the cross-term
// bound folded in, item.key the sums' part). The target side of a move is
// the node taking the instance as primary (its change does not depend on
// the instance's other node) or as secondary (its N+1 reserve depends on
// the memory it already reserves for the new primary, which lies between
// 0 and its largest reserve, and every metric grows with it). Without
// location tags on online nodes (the bound's precondition, !hasMap) a
// moved DRBD instance's location score is 0.
func (b *balancer) drbdPrepare(noDiskMoves bool) drbdRanges {
	s := b.s
	a := &b.agg
	bs := &b.bound
	ns := len(b.shapeOf)
	var r drbdRanges
	bs.items = bs.items[:0]
	bs.dAlpha = bs.dAlpha[:0]
	if noDiskMoves {
		return r
	}
	if len(bs.dt) != len(s.nodes)*2*ns || bs.dTw != a.twins {
		// The entries hold weighted sums over the active metrics,
		// which the load twins change.
		bs.dt = make([]ivEntry, len(s.nodes)*2*ns)
		bs.dVer = make([]uint32, len(s.nodes))
		bs.dTw = a.twins
	}
	if len(bs.dNeeded) != 2*ns {
		bs.dNeeded = make([]bool, 2*ns)
		bs.dOrder = make([][]tEntry, 2*ns)
		bs.dMin = make([]float64, 2*ns)
		bs.dSorted = make([]bool, 2*ns)
	}
	clear(bs.dNeeded)
	// Target sides of the nodes that changed.
	for _, t := range b.online {
		if v := b.nodeVer[t] + 1; bs.dVer[t] != v {
			for h, rep := range b.shapeOf {
				if b.extShape[h] {
					continue
				}
				ni := s.insts[rep]
				// Only auto-balanced instances move, and the shape
				// does not tell (a secondary's reserve counts them
				// only).
				ni.locScore, ni.autoBalance = 0, true
				b.drbdTarget(t, &ni, &bs.dt[t*2*ns+2*h], &bs.dt[t*2*ns+2*h+1])
			}
			bs.dVer[t] = v
		}
	}
	// The instance's own nodes, per move.
	own := bs.dAlpha[:0] // reused below for α
	var fe ivEntry
	owns := bs.owns[:0]
	for ii := range s.insts {
		in := &s.insts[ii]
		if in.tmpl.Mirror() != MirrorInternal || !in.movable || !in.autoBalance || !b.filter.allows(in) || in.sNode < 0 {
			continue
		}
		useSec := !s.nodes[in.sNode].offline
		for _, kind := range [...]MoveKind{ReplaceSecondary, ReplaceAndFailover, ReplacePrimary, FailoverAndReplace} {
			if !useSec && (kind == ReplacePrimary || kind == FailoverAndReplace) {
				continue
			}
			if !b.drbdOwn(ii, kind, &fe) {
				continue // fails whatever the target
			}
			role := 0
			if kind == ReplaceSecondary || kind == FailoverAndReplace {
				role = 1
			}
			hr := 2*int(b.shape[ii]) + role
			bs.dNeeded[hr] = true
			bs.items = append(bs.items, drbdItem{ii: int32(ii), kind: kind, hr: int32(hr), key: fe.lin})
			owns = append(owns, fe)
		}
	}
	bs.owns = owns
	if len(bs.items) == 0 {
		return r
	}
	r.any = true
	// Target side: ranges of β and the largest |D| per metric.
	var absD metricVec
	for _, t := range b.online {
		for hr, ok := range bs.dNeeded {
			if !ok {
				continue
			}
			e := &bs.dt[t*2*ns+hr]
			if !e.ok {
				continue
			}
			for _, k := range a.active {
				if metricKinds[k] != mStdDev {
					continue
				}
				v := a.ivBeta(k, e)
				r.bLo[k], r.bHi[k] = min(r.bLo[k], v), max(r.bHi[k], v)
				absD[k] = max(absD[k], math.Abs(e.dlo[k]), math.Abs(e.dhi[k]))
			}
		}
	}
	// Own side: α with the cross term -2·D_own·D_target/n² bounded below.
	for j := range owns {
		fe := &owns[j]
		var al metricVec
		for _, k := range a.active {
			if metricKinds[k] != mStdDev {
				continue
			}
			x := a.ivBeta(k, fe) - 2*max(math.Abs(fe.dlo[k]), math.Abs(fe.dhi[k]))*absD[k]*a.invN*a.invN
			al[k] = x
			r.aLo[k], r.aHi[k] = min(r.aLo[k], x), max(r.aHi[k], x)
		}
		own = append(own, al)
	}
	bs.dAlpha = own
	return r
}

// ivBeta is an interval side's least part of V_k (see ivEntry): the
// sum-of-squares change at its least, and −(2·s·D + D²)/n², concave in D,
// at the worse end of [dlo, dhi].
func (a *aggregates) ivBeta(k int, e *ivEntry) float64 {
	g := func(d float64) float64 { return 2*a.s[k]*d + d*d }
	return e.qlo[k]*a.invN - max(g(e.dlo[k]), g(e.dhi[k]))*a.invN*a.invN
}

// ivAdd adds to e the change of one node from old to a vector lying,
// metric by metric, between lo and hi.
func (a *aggregates) ivAdd(e *ivEntry, old, lo, hi *metricVec, offline bool) {
	for _, k := range a.active {
		kind := metricKinds[k]
		if (kind == mSumOffline) != offline {
			continue
		}
		o := old[k]
		if kind != mStdDev {
			e.lin += a.w[k] * min(lo[k]-o, hi[k]-o)
			continue
		}
		uo, u1, u2 := o-a.shift[k], lo[k]-a.shift[k], hi[k]-a.shift[k]
		d1, d2 := u1-uo, u2-uo
		e.dlo[k] += min(d1, d2)
		e.dhi[k] += max(d1, d2)
		m := min(u1*u1, u2*u2)
		if (u1 < 0) != (u2 < 0) {
			m = 0 // the shift lies between: the square can reach 0
		}
		e.qlo[k] += m - uo*uo
	}
}

// drbdTarget computes node t's side of taking DRBD instance ni as new
// primary (pri) or new secondary (sec). Only the hard checks are applied:
// a side that fails them fails for every move.
func (b *balancer) drbdTarget(t int, ni *instState, pri, sec *ivEntry) {
	n := &b.s.nodes[t]
	*pri, *sec = ivEntry{}, ivEntry{}
	p := *n
	if p.addPri(ni, true) {
		v := p.vector()
		pri.ok = true
		b.agg.ivAdd(pri, &b.vecs[t], &v, &v, n.offline)
	}
	lo, hi := *n, *n
	if lo.addSecBase(ni, -1, 0, true, true) && hi.addSecBase(ni, -1, maxPeer(n.peers), true, true) {
		vl, vh := lo.vector(), hi.vector()
		sec.ok = true
		b.agg.ivAdd(sec, &b.vecs[t], &vl, &vh, n.offline)
	}
}

// drbdOwn computes the change of DRBD instance ii's own nodes under a disk
// move (as applyMove makes it, with the soft checks off), into e. It
// reports false when the move fails for every target.
func (b *balancer) drbdOwn(ii int, kind MoveKind, e *ivEntry) bool {
	s := b.s
	in := &s.insts[ii]
	pdx, sdx := in.pNode, in.sNode
	ni := *in
	ni.locScore = 0
	*e = ivEntry{}
	p, sn := s.nodes[pdx], s.nodes[sdx]
	add := func(i int, lo, hi *nodeState) {
		vl, vh := lo.vector(), hi.vector()
		b.agg.ivAdd(e, &b.vecs[i], &vl, &vh, s.nodes[i].offline)
	}
	// sec takes ni as a secondary of the target: the interval over the
	// memory it already reserves for the target.
	sec := func(n *nodeState) (lo, hi nodeState, ok bool) {
		lo, hi = *n, *n
		ok = lo.addSecBase(&ni, -1, 0, true, true) && hi.addSecBase(&ni, -1, maxPeer(n.peers), true, true)
		return lo, hi, ok
	}
	switch kind {
	case ReplaceSecondary:
		p.removePri(in)
		sn.removeSec(in, true)
		if !p.addPri(&ni, true) {
			return false
		}
		add(pdx, &p, &p)
		add(sdx, &sn, &sn)
	case ReplaceAndFailover:
		p.removePri(in)
		sn.removeSec(in, true)
		lo, hi, ok := sec(&p)
		if !ok {
			return false
		}
		add(pdx, &lo, &hi)
		add(sdx, &sn, &sn)
	case ReplacePrimary:
		p.removePri(in)
		sn.removeSec(in, true)
		if !sn.addPri(&ni, true) {
			return false
		}
		sn.removePri(&ni)
		lo, hi, ok := sec(&sn)
		if !ok {
			return false
		}
		add(pdx, &p, &p)
		add(sdx, &lo, &hi)
	case FailoverAndReplace:
		p.removePri(in)
		sn.removeSec(in, true)
		if !sn.addPri(&ni, true) {
			return false
		}
		add(pdx, &p, &p)
		add(sdx, &sn, &sn)
	default:
		return false
	}
	return true
}

// sideKey is one side's part of the bound: Σ σ_k·w_k·x_k over the deviation
// metrics (x = α for a source given in alpha, β for a target) plus the
// weighted change of the sums.
func (b *balancer) sideKey(d *delta, alpha []float64) float64 {
	a := &b.agg
	bs := &b.bound
	key := 0.0
	for m := d.mask; m != 0; m &= m - 1 {
		k := bits.TrailingZeros32(m)
		if metricKinds[k] != mStdDev {
			key += a.w[k] * d.ds[k]
		} else if alpha == nil {
			key += a.w[k] * bs.sigma[k] * a.beta(k, d.ds[k], d.dq[k])
		}
	}
	if alpha != nil {
		for _, k := range a.active {
			if metricKinds[k] == mStdDev {
				key += a.w[k] * bs.sigma[k] * alpha[k]
			}
		}
	}
	return key
}
