package ganeti

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"sync"
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
// full scan. DRBD moves (three nodes, peer-dependent N+1 memory) are all
// scored, as in the full scan, on GOMAXPROCS goroutines.

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
	other  []int32   // movable DRBD instances
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
	// Chords.
	var lconst float64 = a.base
	for _, k := range a.active {
		if metricKinds[k] != mStdDev {
			continue
		}
		v0 := a.q[k]*a.invN - (a.s[k]*a.invN)*(a.s[k]*a.invN)
		lo, hi := aLo[k]+bs.bLo[k], aHi[k]+bs.bHi[k]
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

	// DRBD and other non-migration moves: all of them, as in scan, split
	// over the workers (each keeps a superset of what one scan would).
	bs.other = bs.other[:0]
	for ii := range s.insts {
		in := &s.insts[ii]
		if in.tmpl.Mirror() == MirrorInternal && in.movable && in.autoBalance && b.filter.allows(in) {
			bs.other = append(bs.other, int32(ii))
		}
	}
	nw := len(b.workers)
	if len(bs.other)*len(b.online)*4 < parallelThreshold {
		nw = 1
	}
	var wg sync.WaitGroup
	per := (len(bs.other) + nw - 1) / max(nw, 1)
	for k := 1; k < nw; k++ {
		lo, hi := min(k*per, len(bs.other)), min((k+1)*per, len(bs.other))
		wg.Add(1)
		go func(x *scanWorker) {
			defer wg.Done()
			x.reset()
			for _, ii := range bs.other[lo:hi] {
				b.scanInst(x, int(ii), force, noDiskMoves)
			}
		}(&b.workers[k])
	}
	for _, ii := range bs.other[:min(per, len(bs.other))] {
		b.scanInst(w, int(ii), force, noDiskMoves)
	}
	wg.Wait()
	for k := 1; k < nw; k++ {
		x := &b.workers[k]
		w.cands = append(w.cands, x.cands...)
		w.best = min(w.best, x.best)
		w.evals += x.evals
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
	// The most promising instance first, for a low best estimate early;
	// then every other one whose bound still allows it.
	if first >= 0 {
		migrations(first)
	}
	for _, ii := range bs.order {
		if int(ii) != first {
			migrations(int(ii))
		}
	}
	// Back to Ganeti's scan order: by instance, then target (a DRBD
	// instance's failover, tdx -1, first; its moves per target are already
	// in order and the sort is stable).
	slices.SortStableFunc(w.cands, func(x, y cand) int {
		if c := cmp.Compare(x.ii, y.ii); c != 0 {
			return c
		}
		return cmp.Compare(x.tdx, y.tdx)
	})
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
