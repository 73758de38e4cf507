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
	sigma  metricVec // chord slopes, kept between refreshes
	ws     metricVec // w_k·σ_k
	be     []bEntry  // compact tc, same index
	beVer  []uint32  // node version be and dt were built at (0: never)
	beTw   bool      // twins flag be and dt were built with
	srcAt  []int32   // per instance: node srcD was computed on
	srcVer []uint32  // and its version (0: never)

	// Reference (see refreshEvery): the shifted sums s0 and 1/n the
	// target keys were computed at, and the steps since.
	s0      metricVec
	refInvN float64
	age     int
	touched []int // nodes whose target sides changed this step
	// Per metric, over every cached target side at s0: the range of β
	// and the largest |shifted-sum change|, migrations (m) and DRBD (d),
	// the latter also per class. They only grow between refreshes.
	mLo, mHi, absB metricVec
	dLo, dHi, absD metricVec
	absBh, absDh   []metricVec
	corrM, corrD   []float64 // per class: the drift's lowering of the keys
	// need marks the classes some instance of this step moves with; inRef
	// those the reference covers (a refresh follows when they differ).
	need, inRef []bool
	mig, drbd   keyIndex // target keys at s0 with the slopes ws

	// DRBD moves (see drbdItem): per node, shape and role the target
	// side (built with be); the (instance, kind) items of this step with
	// their α; their own sides, cached per (instance, kind) while the two
	// nodes do not change.
	dt     []ivEntry
	items  []drbdItem
	dAlpha []metricVec
	owns   []*ivEntry // per item: the instance's own nodes (in oc)
	oc     []ownCache
	fo     []foCache // per instance: its failover
}

// foCache is a DRBD instance's failover as the changes of its two nodes
// (estimate2 of them is evaluate's estimate, to the bit), valid while the
// nodes, their versions and the force flag are the ones recorded.
type foCache struct {
	p, s       int32
	pVer, sVer uint32 // 0: never computed
	force, ok  bool
	dp, ds     delta
}

// ownCache is drbdOwn's result for one (instance, kind), valid while the
// instance's nodes and their versions are the ones recorded.
type ownCache struct {
	p, s       int32
	pVer, sVer uint32 // 0: never computed
	force, ok  bool
	e          ivEntry
}

// refreshEvery is how many steps the bound keeps its slopes σ and the
// target keys computed at the reference sums s0. In between, only the
// target sides of the nodes a move changed are recomputed (at s0), and the
// drift of the sums since the reference is accounted for exactly where it
// enters (see scanBounded), so every bound stays a lower bound.
const refreshEvery = 32

// keyIndex holds a key per (node, class) and, per class, the nodes by
// increasing key; a changed node is moved in place.
type keyIndex struct {
	nc    int
	key   []float64
	has   []bool
	lists [][]tEntry
}

func cmpTEntry(x, y tEntry) int {
	if c := cmp.Compare(x.key, y.key); c != 0 {
		return c
	}
	return cmp.Compare(x.t, y.t)
}

func (x *keyIndex) init(nodes, nc int) {
	x.nc = nc
	x.key = make([]float64, nodes*nc)
	x.has = make([]bool, nodes*nc)
	x.lists = make([][]tEntry, nc)
}

// put records node t's key in class h (ok false: no entry) without
// touching the lists; sortAll then rebuilds them.
func (x *keyIndex) put(t, h int, key float64, ok bool) {
	x.key[t*x.nc+h], x.has[t*x.nc+h] = key, ok
}

func (x *keyIndex) sortAll(online []int, inRef []bool) {
	for h := range x.lists {
		l := x.lists[h][:0]
		for _, t := range online {
			if inRef[h] && x.has[t*x.nc+h] {
				l = append(l, tEntry{t: int32(t), key: x.key[t*x.nc+h]})
			}
		}
		slices.SortFunc(l, cmpTEntry)
		x.lists[h] = l
	}
}

// set changes node t's key in class h and moves it in the list.
func (x *keyIndex) set(t, h int, key float64, ok bool) {
	i := t*x.nc + h
	l := x.lists[h]
	if x.has[i] {
		if j, found := slices.BinarySearchFunc(l, tEntry{t: int32(t), key: x.key[i]}, cmpTEntry); found {
			l = slices.Delete(l, j, j+1)
		}
	}
	x.key[i], x.has[i] = key, ok
	if ok {
		e := tEntry{t: int32(t), key: key}
		j, _ := slices.BinarySearchFunc(l, e, cmpTEntry)
		l = slices.Insert(l, j, e)
	}
	x.lists[h] = l
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
	full bool // the target is checked with the soft checks off: try every node
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
//
// The target keys T do not have to be recomputed every step. Any slope
// σ_k >= 0 gives a valid bound once L_k is the least of sqrt(V0+u) − σ_k·u
// over the range of u = α+β (the concave function's least value on an
// interval is at an end, and below −V0 the line lies under 0), so σ is
// kept between refreshes and only L is recomputed. A target's β depends on
// the current sums s only through −2·s·ds/n² (migrations) or the largest
// of 2·s·d+d² at the ends of [dlo, dhi] (DRBD), so with s = s0 + δ it lies
// within 2·|δ|·max|d|/n² of its value at s0: every key computed at s0 is
// lowered by Σ w_k·σ_k·2·|δ_k|·max|d_k|/n² (corrM, corrD) and the ranges
// of β widened by as much. Only the nodes a move changed get new keys (at
// s0), and the ranges and largest |d| only grow until the next refresh.
func (b *balancer) scanBounded(w *scanWorker, force, noDiskMoves bool) {
	w.reset()
	full := b.boundTargets()
	full = b.boundClasses(force, noDiskMoves) || full
	ref := b.boundReference(full)
	aLo, aHi := b.boundSources(force)
	// DRBD disk moves: their own α and range.
	da := b.drbdPrepare(force, noDiskMoves)
	lconst := b.boundChords(ref, aLo, aHi, da)
	b.boundKeys(ref)
	// K(i) + min T: the bound over all of instance i's migrations.
	bs := &b.bound
	first, firstKey := -1, math.Inf(1)
	for _, ii := range bs.order {
		h := b.boundClass(int(ii), force)
		k := lconst + b.sideKey(&bs.srcD[ii], bs.alpha[int(ii)*nMetrics:int(ii+1)*nMetrics]) - bs.corrM[h]
		bs.key[ii] = k
		if k+bs.mig.least(h) < firstKey {
			first, firstKey = int(ii), k+bs.mig.least(h)
		}
	}
	b.scanFailovers(w, force)
	// DRBD disk moves: K per item, as for migrations.
	firstD := -1
	for j := range bs.items {
		it := &bs.items[j]
		it.key += lconst - bs.corrD[it.hr]
		for _, k := range b.agg.active {
			if metricKinds[k] == mStdDev {
				it.key += bs.ws[k] * bs.dAlpha[j][k]
			}
		}
		if m := it.key + bs.drbd.least(int(it.hr)); m < firstKey {
			firstD, firstKey = j, m
		}
	}
	// The most promising migration or DRBD move first, for a low best
	// estimate early; then every other one whose bound still allows it.
	if firstD >= 0 {
		b.scanDiskBounded(w, firstD, force)
	} else if first >= 0 {
		b.scanMigrationsBounded(w, first, force)
	}
	for _, ii := range bs.order {
		if int(ii) != first || firstD >= 0 {
			b.scanMigrationsBounded(w, int(ii), force)
		}
	}
	for j := range bs.items {
		if j != firstD {
			b.scanDiskBounded(w, j, force)
		}
	}
	sortScanOrder(w.cands)
}

// sortScanOrder puts candidates back in Ganeti's scan order: by instance,
// then target (a DRBD instance's failover, tdx -1, first), then a DRBD
// instance's moves to one target in scanInst's order.
func sortScanOrder(cands []cand) {
	slices.SortFunc(cands, func(x, y cand) int {
		if c := cmp.Compare(x.ii, y.ii); c != 0 {
			return c
		}
		if c := cmp.Compare(x.tdx, y.tdx); c != 0 {
			return c
		}
		return cmp.Compare(kindRank[x.kind], kindRank[y.kind])
	})
}

// boundClass is the class of instance ii's migrations: 2·shape, plus 1
// when the move is forced (its primary is offline, or force).
func (b *balancer) boundClass(ii int, force bool) int {
	in := &b.s.insts[ii]
	if b.s.nodes[in.pNode].offline || force {
		return 2*int(b.shape[ii]) + 1
	}
	return 2 * int(b.shape[ii])
}

// least is the least key in class h (+Inf: none).
func (x *keyIndex) least(h int) float64 {
	if l := x.lists[h]; len(l) > 0 {
		return l[0].key
	}
	return math.Inf(1)
}

// boundTargets sizes the scratch for this cluster and recomputes the
// target sides of the nodes that changed (bs.touched). It reports whether
// the scratch was rebuilt, which needs a full refresh.
func (b *balancer) boundTargets() (full bool) {
	s := b.s
	a := &b.agg
	bs := &b.bound
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
		// The entries hold weighted sums over the active metrics,
		// which the load twins change.
		bs.be = make([]bEntry, len(b.tc))
		bs.dt = nil
		if b.filter != moveExternal {
			// DRBD target sides (half a kilobyte per shape and
			// node): only when DRBD instances may move.
			bs.dt = make([]ivEntry, len(b.tc))
		}
		bs.beVer = make([]uint32, len(s.nodes))
		bs.beTw = a.twins
		bs.mig.init(len(s.nodes), 2*ns)
		bs.drbd.init(len(s.nodes), 2*ns)
		bs.absBh, bs.absDh = make([]metricVec, 2*ns), make([]metricVec, 2*ns)
		bs.corrM, bs.corrD = make([]float64, 2*ns), make([]float64, 2*ns)
		bs.need, bs.inRef = make([]bool, 2*ns), make([]bool, 2*ns)
		bs.oc = make([]ownCache, 4*nIn)
		bs.fo = make([]foCache, nIn)
		clear(bs.srcVer)
		full = true
	}
	// Target sides of the nodes that changed.
	bs.touched = bs.touched[:0]
	for _, t := range b.online {
		if v := b.nodeVer[t] + 1; bs.beVer[t] != v {
			for h, rep := range b.shapeOf {
				if b.extShape[h] {
					b.compact(&b.tc[(t*ns+h)*2], &bs.be[(t*ns+h)*2])
					b.compact(&b.tc[(t*ns+h)*2+1], &bs.be[(t*ns+h)*2+1])
					continue
				}
				if bs.dt == nil {
					continue
				}
				ni := s.insts[rep]
				// Only auto-balanced instances move, and the shape
				// does not tell (a secondary's reserve counts them
				// only).
				ni.locScore, ni.autoBalance = 0, true
				b.drbdTarget(t, &ni, &bs.dt[t*2*ns+2*h], &bs.dt[t*2*ns+2*h+1])
			}
			bs.beVer[t] = v
			bs.touched = append(bs.touched, t)
		}
	}
	return full
}

// boundClasses lists the migrating instances of this step (bs.order) and
// marks the classes (shape and flag or role) it needs (bs.need). It
// reports whether a needed class is not in the reference (a full refresh).
func (b *balancer) boundClasses(force, noDiskMoves bool) (full bool) {
	s := b.s
	bs := &b.bound
	clear(bs.need)
	bs.order = bs.order[:0]
	for ii := range s.insts {
		in := &s.insts[ii]
		if !in.movable || !in.autoBalance || !b.filter.allows(in) {
			continue
		}
		switch in.tmpl.Mirror() {
		case MirrorExternal:
			bs.need[b.boundClass(ii, force)] = true
			bs.order = append(bs.order, int32(ii))
		case MirrorInternal:
			if !noDiskMoves && in.sNode >= 0 {
				bs.need[2*int(b.shape[ii])], bs.need[2*int(b.shape[ii])+1] = true, true
			}
		}
	}
	for h, ok := range bs.need {
		if ok && !bs.inRef[h] {
			full = true
		}
	}
	return full
}

// boundRef is how this step's bound relates to the reference: whether the
// slopes are refreshed (a full refresh, or an aged one) and the drift of
// the sums since the reference, per metric, for migrations and DRBD moves.
type boundRef struct {
	refresh, aged         bool
	drift, driftM, driftD metricVec
}

// resetRanges moves the reference to the current sums and empties the
// ranges of β and the largest |d|.
func (b *balancer) resetRanges() {
	a, bs := &b.agg, &b.bound
	bs.s0, bs.refInvN = a.s, a.invN
	for _, k := range a.active {
		bs.mLo[k], bs.mHi[k], bs.absB[k] = 0, 0, 0
		bs.dLo[k], bs.dHi[k], bs.absD[k] = 0, 0, 0
	}
	clear(bs.absBh)
	clear(bs.absDh)
}

// boundReference decides the refresh and brings the ranges up to date. A
// full refresh (full, or the number of online nodes changed) computes the
// ranges at the new reference first, so that the slopes fit them; an aged
// one (only the drift grew) takes the slopes from the current ranges,
// widened for the drift, and then computes ranges and keys in one pass
// (boundKeys).
func (b *balancer) boundReference(full bool) boundRef {
	a, bs := &b.agg, &b.bound
	full = full || bs.refInvN != a.invN
	every := refreshEvery
	if b.refreshAfter > 0 {
		every = b.refreshAfter
	}
	ref := boundRef{aged: !full && bs.age >= every}
	ref.refresh = full || ref.aged
	switch {
	case full:
		copy(bs.inRef, bs.need)
		b.resetRanges()
		for _, t := range b.online {
			b.targetUpdate(t, rangesOnly)
		}
	case ref.aged:
		// The changed nodes widen the old ranges; keys follow below.
		for _, t := range bs.touched {
			b.targetUpdate(t, rangesOnly)
		}
	default:
		for _, t := range bs.touched {
			b.targetUpdate(t, rangesMove)
		}
	}
	bs.age++
	// δ = s − s0 moves every β by at most 2·|δ|·max|d|/n².
	inv2 := a.invN * a.invN
	for _, k := range a.active {
		if metricKinds[k] == mStdDev {
			ref.drift[k] = 2 * math.Abs(a.s[k]-bs.s0[k]) * inv2
			ref.driftM[k], ref.driftD[k] = ref.drift[k]*bs.absB[k], ref.drift[k]*bs.absD[k]
		}
	}
	return ref
}

// boundSources computes the source side: the exact change of removing
// each migrating instance, and α with the cross-term bound folded in. It
// returns the range of α per metric.
func (b *balancer) boundSources(force bool) (aLo, aHi metricVec) {
	s := b.s
	a, bs := &b.agg, &b.bound
	inv2 := a.invN * a.invN
	for _, ii32 := range bs.order {
		ii := int(ii32)
		in := &s.insts[ii]
		d := &bs.srcD[ii]
		h := b.boundClass(ii, force)
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
				x = a.beta(k, d.ds[k], d.dq[k]) - 2*math.Abs(d.ds[k])*bs.absBh[h][k]*inv2
			}
			al[k] = x
			aLo[k] = min(aLo[k], x)
			aHi[k] = max(aHi[k], x)
		}
	}
	return aLo, aHi
}

// boundChords fits the chords: the slopes at a refresh, the intercepts
// every step. It returns the constant part of every key.
func (b *balancer) boundChords(ref boundRef, aLo, aHi metricVec, da drbdRanges) float64 {
	a, bs := &b.agg, &b.bound
	var lconst float64 = a.base
	for _, k := range a.active {
		if metricKinds[k] != mStdDev {
			continue
		}
		v0 := a.q[k]*a.invN - (a.s[k]*a.invN)*(a.s[k]*a.invN)
		lo, hi := aLo[k]+bs.mLo[k]-ref.driftM[k], aHi[k]+bs.mHi[k]+ref.driftM[k]
		if da.any {
			lo, hi = min(lo, da.aLo[k]+bs.dLo[k]-ref.driftD[k]), max(hi, da.aHi[k]+bs.dHi[k]+ref.driftD[k])
		}
		g := func(u float64) float64 { return math.Sqrt(max(0, v0+u)) }
		lo = max(lo, -v0)
		if ref.refresh {
			sig := 0.0
			if hi > lo {
				sig = (g(hi) - g(lo)) / (hi - lo)
			}
			bs.sigma[k] = sig
			bs.ws[k] = a.w[k] * sig
		}
		sig := bs.sigma[k]
		var l float64
		if hi < lo {
			l = -sig * hi // every pair is below −V0, where sd is 0
		} else {
			l = min(g(lo)-sig*lo, g(hi)-sig*hi)
		}
		lconst += a.w[k] * (l - a.cur[k])
	}
	return lconst
}

// boundKeys, at a refresh, computes every target key at the new reference
// with the new slopes (an aged refresh moves the reference here: the
// chords used the old one, widened for the drift); then the drift's
// lowering of the keys per class (corrM, corrD).
func (b *balancer) boundKeys(ref boundRef) {
	a, bs := &b.agg, &b.bound
	drift := ref.drift
	if ref.refresh {
		if ref.aged {
			b.resetRanges()
			clear(drift[:])
		}
		for _, t := range b.online {
			b.targetUpdate(t, rangesPut)
		}
		bs.mig.sortAll(b.online, bs.inRef)
		bs.drbd.sortAll(b.online, bs.inRef)
		bs.age = 1
	}
	for h := 0; h < 2*len(b.shapeOf); h++ {
		bs.corrM[h], bs.corrD[h] = 0, 0
		for _, k := range a.active {
			bs.corrM[h] += bs.ws[k] * drift[k] * bs.absBh[h][k]
			bs.corrD[h] += bs.ws[k] * drift[k] * bs.absDh[h][k]
		}
	}
}

// scanFailovers records every DRBD failover (one per instance, no
// target), each from its cached node changes.
func (b *balancer) scanFailovers(w *scanWorker, force bool) {
	s := b.s
	a, bs := &b.agg, &b.bound
	for ii := range s.insts {
		in := &s.insts[ii]
		if in.tmpl.Mirror() == MirrorInternal && in.movable && in.autoBalance && b.filter.allows(in) &&
			in.sNode >= 0 && !s.nodes[in.sNode].offline {
			c := &bs.fo[ii]
			pv, sv := b.nodeVer[in.pNode]+1, b.nodeVer[in.sNode]+1
			if c.p != int32(in.pNode) || c.s != int32(in.sNode) || c.pVer != pv || c.sVer != sv || c.force != force {
				c.p, c.s, c.pVer, c.sVer, c.force = int32(in.pNode), int32(in.sNode), pv, sv, force
				c.ok = b.s.applyMove(ii, Failover, -1, force, true, &w.r)
				if c.ok {
					// applyMove puts the primary first, as estimate
					// sums them.
					r := &w.r
					for k, d := range [2]*delta{&c.dp, &c.ds} {
						i := r.idx[k]
						v := r.nodes[k].vector()
						a.delta(&b.vecs[i], &v, s.nodes[i].offline, d)
					}
				}
			}
			if c.ok {
				w.evals++
				w.record(ii, Failover, -1, a.estimate2(&c.dp, &c.ds))
			}
		}
	}
}

// beyond reports whether a bound x rules a move out: it is above the best
// estimate so far by more than the estimates' rounding.
func (w *scanWorker) beyond(x float64) bool {
	return x-boundSlack*(1+math.Abs(x)) > w.best+estimateWindow
}

// scanMigrationsBounded scores instance ii's migrations whose bound allows
// them, targets by increasing key.
func (b *balancer) scanMigrationsBounded(w *scanWorker, ii int, force bool) {
	s := b.s
	a, bs := &b.agg, &b.bound
	ns := len(b.shapeOf)
	in := &s.insts[ii]
	h := b.boundClass(ii, force)
	k := bs.key[ii]
	if w.beyond(k + bs.mig.least(h)) {
		return
	}
	op := &s.nodes[in.pNode]
	for _, te := range bs.mig.lists[h] {
		if w.beyond(k + te.key) {
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

// scanDiskBounded scores DRBD item j's moves whose bound allows them,
// targets by increasing key (every target when its soft checks are off).
func (b *balancer) scanDiskBounded(w *scanWorker, j int, force bool) {
	bs := &b.bound
	it := &bs.items[j]
	in := &b.s.insts[it.ii]
	if it.full {
		// The target's soft checks are off: no key rules it out.
		for _, tdx := range b.online {
			if tdx == in.pNode || tdx == in.sNode {
				continue
			}
			if est, ok := b.evaluate(&w.r, int(it.ii), it.kind, tdx, force); ok {
				w.evals++
				w.record(int(it.ii), it.kind, tdx, est)
			}
		}
		return
	}
	if b.onBound != nil {
		b.reportBounds(w, j, force)
	}
	if w.beyond(it.key + bs.drbd.least(int(it.hr))) {
		return
	}
	for _, te := range bs.drbd.lists[it.hr] {
		if w.beyond(it.key + te.key) {
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

// reportBounds is the test hook onBound: every target's bound for DRBD
// item j against its estimate; a target without a key (it fails the soft
// checks) must fail the move (bound +Inf).
func (b *balancer) reportBounds(w *scanWorker, j int, force bool) {
	bs := &b.bound
	ns := len(b.shapeOf)
	it := &bs.items[j]
	in := &b.s.insts[it.ii]
	for _, tdx := range b.online {
		if tdx == in.pNode || tdx == in.sNode {
			continue
		}
		bound := math.Inf(1)
		if i := tdx*bs.drbd.nc + int(it.hr); bs.drbd.has[i] {
			bound = it.key + bs.drbd.key[i]
		}
		if est, ok := b.evaluate(&w.r, int(it.ii), it.kind, tdx, force); ok {
			b.onBound(int(it.ii), it.kind, tdx, bound, est, bs.owns[j], &bs.dt[tdx*2*ns+int(it.hr)])
		}
	}
}

// Modes of targetUpdate.
const (
	rangesOnly = iota // widen the ranges (keys follow with rangesPut)
	rangesPut         // and record the keys; sortAll follows
	rangesMove        // and move the keys in the sorted lists
)

// targetUpdate widens the ranges of β at s0 and the largest |d| per
// metric by node t's target sides (migrations and DRBD) and, unless mode
// is rangesOnly, computes its keys with the slopes ws. Widening twice by
// the same sides changes nothing.
func (b *balancer) targetUpdate(t, mode int) {
	a := &b.agg
	bs := &b.bound
	ns := len(b.shapeOf)
	put := func(x *keyIndex, h int, key float64, ok bool) {
		switch mode {
		case rangesPut:
			x.put(t, h, key, ok)
		case rangesMove:
			x.set(t, h, key, ok)
		}
	}
	inv2 := a.invN * a.invN
	for h := 0; h < ns; h++ {
		if b.extShape[h] {
			for f := 0; f < 2; f++ {
				c := 2*h + f
				if !bs.inRef[c] {
					continue
				}
				e := &bs.be[(t*ns+h)*2+f]
				if !e.ok {
					put(&bs.mig, c, 0, false)
					continue
				}
				key := e.lin
				ah := &bs.absBh[c]
				for j := 0; j < int(e.n); j++ {
					k := int(e.k[j])
					v := e.p[j] - 2*bs.s0[k]*inv2*e.ds[j]
					key += bs.ws[k] * v
					bs.mLo[k], bs.mHi[k] = min(bs.mLo[k], v), max(bs.mHi[k], v)
					d := math.Abs(e.ds[j])
					bs.absB[k] = max(bs.absB[k], d)
					ah[k] = max(ah[k], d)
				}
				put(&bs.mig, c, key, true)
			}
			continue
		}
		for r := 0; r < 2; r++ {
			c := 2*h + r
			if !bs.inRef[c] {
				continue
			}
			e := &bs.dt[t*2*ns+c]
			if !e.ok {
				put(&bs.drbd, c, 0, false)
				continue
			}
			key := e.lin
			ah := &bs.absDh[c]
			for _, k := range a.active {
				if metricKinds[k] != mStdDev {
					continue
				}
				v := a.ivBetaAt(k, e, bs.s0[k])
				key += bs.ws[k] * v
				bs.dLo[k], bs.dHi[k] = min(bs.dLo[k], v), max(bs.dHi[k], v)
				d := max(math.Abs(e.dlo[k]), math.Abs(e.dhi[k]))
				bs.absD[k] = max(bs.absD[k], d)
				ah[k] = max(ah[k], d)
			}
			put(&bs.drbd, c, key, true)
		}
	}
}

// kindRank is the order in which scanInst tries a DRBD instance's moves to
// one target.
var kindRank = [...]int{Failover: 0, Migrate: 0, ReplaceSecondary: 1, ReplaceAndFailover: 2, ReplacePrimary: 3, FailoverAndReplace: 4}

// drbdRanges are the ranges of α over the DRBD moves of a step.
type drbdRanges struct {
	any      bool
	aLo, aHi metricVec
}

// drbdMoves are a DRBD instance's disk moves, in drbdOwn's cache order.
var drbdMoves = [...]MoveKind{ReplaceSecondary, ReplaceAndFailover, ReplacePrimary, FailoverAndReplace}

// drbdPrepare computes, for every movable DRBD instance and each of its
// disk moves, the interval of its own nodes' change (bs.items, bs.dAlpha
// holding α with the cross-term bound folded in, item.key the sums' part).
// The target side of a move (bs.dt) is the node taking the instance as
// primary (its change does not depend on the instance's other node) or as
// secondary (its N+1 reserve depends on the memory it already reserves for
// the new primary, which lies between 0 and its largest reserve, and every
// metric grows with it). Without location tags on online nodes (the
// bound's precondition, !hasMap) a moved DRBD instance's location score is
// 0. The own side is recomputed only when one of the instance's nodes
// changed.
func (b *balancer) drbdPrepare(force, noDiskMoves bool) drbdRanges {
	s := b.s
	a := &b.agg
	bs := &b.bound
	var r drbdRanges
	bs.items = bs.items[:0]
	bs.dAlpha = bs.dAlpha[:0]
	if noDiskMoves {
		return r
	}
	own := bs.dAlpha[:0] // reused below for α
	owns := bs.owns[:0]
	for ii := range s.insts {
		in := &s.insts[ii]
		if in.tmpl.Mirror() != MirrorInternal || !in.movable || !in.autoBalance || !b.filter.allows(in) || in.sNode < 0 {
			continue
		}
		useSec := !s.nodes[in.sNode].offline
		pv, sv := b.nodeVer[in.pNode]+1, b.nodeVer[in.sNode]+1
		for ki, kind := range drbdMoves {
			if !useSec && (kind == ReplacePrimary || kind == FailoverAndReplace) {
				continue
			}
			c := &bs.oc[4*ii+ki]
			if c.p != int32(in.pNode) || c.s != int32(in.sNode) || c.pVer != pv || c.sVer != sv || c.force != force {
				c.ok = b.drbdOwn(ii, kind, force, &c.e)
				c.p, c.s, c.pVer, c.sVer, c.force = int32(in.pNode), int32(in.sNode), pv, sv, force
			}
			if !c.ok {
				continue // fails whatever the target
			}
			role := 0
			if kind == ReplaceSecondary || kind == FailoverAndReplace {
				role = 1
			}
			hr := 2*int(b.shape[ii]) + role
			// The force flag applyMove checks the target with: the
			// target keys hold only targets that pass the soft checks.
			var full bool
			switch kind {
			case ReplacePrimary, FailoverAndReplace:
				full = s.nodes[in.pNode].offline || force
			case ReplaceSecondary:
				full = s.nodes[in.sNode].offline || force
			default:
				full = force
			}
			bs.items = append(bs.items, drbdItem{ii: int32(ii), kind: kind, hr: int32(hr), key: c.e.lin, full: full})
			owns = append(owns, &c.e)
		}
	}
	bs.owns = owns
	if len(bs.items) == 0 {
		return r
	}
	r.any = true
	// Own side: α with the cross term -2·D_own·D_target/n² bounded below
	// by the largest |D| of any target.
	for j := range owns {
		fe := owns[j]
		var al metricVec
		for _, k := range a.active {
			if metricKinds[k] != mStdDev {
				continue
			}
			x := a.ivBeta(k, fe) - 2*max(math.Abs(fe.dlo[k]), math.Abs(fe.dhi[k]))*bs.absDh[bs.items[j].hr][k]*a.invN*a.invN
			al[k] = x
			r.aLo[k], r.aHi[k] = min(r.aLo[k], x), max(r.aHi[k], x)
		}
		own = append(own, al)
	}
	bs.dAlpha = own
	return r
}

// ivBetaAt is ivBeta with the shifted sum s in place of the current one.
func (a *aggregates) ivBetaAt(k int, e *ivEntry, s float64) float64 {
	g := func(d float64) float64 { return 2*s*d + d*d }
	return e.qlo[k]*a.invN - max(g(e.dlo[k]), g(e.dhi[k]))*a.invN*a.invN
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
// primary (pri) or new secondary (sec), with the soft checks on: a side
// that fails them fails for every move that checks them on the target
// (items with full set scan every target instead). A new secondary must
// pass them at the least reserve (they fail at every larger one too).
func (b *balancer) drbdTarget(t int, ni *instState, pri, sec *ivEntry) {
	n := &b.s.nodes[t]
	*pri, *sec = ivEntry{}, ivEntry{}
	p := *n
	if p.addPri(ni, false) {
		v := p.vector()
		pri.ok = true
		b.agg.ivAdd(pri, &b.vecs[t], &v, &v, n.offline)
	}
	lo, hi := *n, *n
	if lo.addSecBase(ni, -1, 0, false, true) && hi.addSecBase(ni, -1, maxPeer(n.peers), true, true) {
		vl, vh := lo.vector(), hi.vector()
		sec.ok = true
		b.agg.ivAdd(sec, &b.vecs[t], &vl, &vh, n.offline)
	}
}

// drbdOwn computes the change of DRBD instance ii's own nodes under a disk
// move (as applyMove makes it; the interval ends with the soft checks
// off), into e. It reports false when the move fails for every target: a
// hard check, or a soft check applyMove makes on the own nodes (tags,
// N+1, vCPU ratio) with the force flags it would use.
func (b *balancer) drbdOwn(ii int, kind MoveKind, force bool, e *ivEntry) bool {
	s := b.s
	in := &s.insts[ii]
	pdx, sdx := in.pNode, in.sNode
	forceP := s.nodes[pdx].offline || force
	forceS := s.nodes[sdx].offline || force
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
	// With the soft checks on (f false) it must pass them at the least
	// reserve: they fail at every larger one too.
	sec := func(n *nodeState, f bool) (lo, hi nodeState, ok bool) {
		lo, hi = *n, *n
		ok = lo.addSecBase(&ni, -1, 0, f, true) && hi.addSecBase(&ni, -1, maxPeer(n.peers), true, true)
		return lo, hi, ok
	}
	// Every kind starts by taking the instance off both its nodes and ends
	// by recording both nodes' intervals (lo..hi; a single point unless
	// the node becomes the target's secondary).
	p.removePri(in)
	sn.removeSec(in, true)
	pLo, pHi, sLo, sHi := &p, &p, &sn, &sn
	switch kind {
	case ReplaceSecondary:
		if !p.addPri(&ni, true) {
			return false
		}
	case ReplaceAndFailover:
		lo, hi, ok := sec(&p, forceS)
		if !ok {
			return false
		}
		pLo, pHi = &lo, &hi
	case ReplacePrimary, FailoverAndReplace:
		// Both fail over to the secondary first; ReplacePrimary then
		// moves the primary on to the target, which keeps the old
		// secondary as its secondary.
		if !migrationOK(&s.nodes[pdx], &s.nodes[sdx]) || !sn.addPri(&ni, forceP) {
			return false
		}
		if kind == ReplacePrimary {
			sn.removePri(&ni)
			lo, hi, ok := sec(&sn, forceP)
			if !ok {
				return false
			}
			sLo, sHi = &lo, &hi
		}
	default:
		return false
	}
	add(pdx, pLo, pHi)
	add(sdx, sLo, sHi)
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
