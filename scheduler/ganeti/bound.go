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
// Instances are visited by increasing K + min T, each one's targets by
// increasing T, and a pair is scored only while its bound is within
// estimateWindow of the best estimate so far: a pair above that cannot be
// the best move (its estimate is above the best estimate, its exact score
// above the best exact one, by more than the estimates' rounding, which
// estimateWindow bounds). The candidates kept are then put back in Ganeti's
// scan order, so the exact re-scoring picks the same first-best move as the
// full scan. DRBD moves (three nodes, peer-dependent N+1 memory) are all
// scored, as in the full scan.

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
	order  []int32   // migration instances by K + min T
	tOrder [][]tEntry
	tMin   []float64
	sigma  metricVec
	lo, hi metricVec // ranges of α and β, then of α+β
	bLo    metricVec
	bHi    metricVec
	absB   metricVec
	needed []bool // (shape, flag) used by some instance
	hs     []int  // the needed ones
	sorted []bool // tOrder[h] is sorted
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
			e := &b.tc[t*2*ns+h]
			if !e.ok {
				continue
			}
			for m := e.d.mask & sdMask; m != 0; m &= m - 1 {
				k := bits.TrailingZeros32(m)
				v := a.beta(k, e.d.ds[k], e.d.dq[k])
				bs.bLo[k] = min(bs.bLo[k], v)
				bs.bHi[k] = max(bs.bHi[k], v)
				bs.absB[k] = max(bs.absB[k], math.Abs(e.d.ds[k]))
			}
		}
	}
	// Source side: the exact change of removing each instance, and α with
	// the cross-term bound folded in.
	var aLo, aHi metricVec
	for _, ii32 := range bs.order {
		ii := int(ii32)
		in := &s.insts[ii]
		src := s.nodes[in.pNode]
		src.removePri(in)
		v := src.vector()
		d := &bs.srcD[ii]
		a.delta(&b.vecs[in.pNode], &v, src.offline, d)
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
	for _, t := range b.online {
		for _, h := range bs.hs {
			e := &b.tc[t*2*ns+h]
			if !e.ok {
				continue
			}
			k := b.sideKey(&e.d, nil)
			bs.tOrder[h] = append(bs.tOrder[h], tEntry{t: int32(t), key: k})
			bs.tMin[h] = min(bs.tMin[h], k)
		}
	}
	for _, ii := range bs.order {
		bs.key[ii] = lconst + b.sideKey(&bs.srcD[ii], bs.alpha[int(ii)*nMetrics:int(ii+1)*nMetrics])
	}
	slices.SortFunc(bs.order, func(x, y int32) int {
		hx := 2*int(b.shape[x]) + fbOf(&s.insts[x])
		hy := 2*int(b.shape[y]) + fbOf(&s.insts[y])
		return cmp.Compare(bs.key[x]+bs.tMin[hx], bs.key[y]+bs.tMin[hy])
	})

	// DRBD and other non-migration moves: all of them, as in scan.
	for ii := range s.insts {
		in := &s.insts[ii]
		if in.tmpl.Mirror() != MirrorExternal {
			b.scanInst(w, ii, force, noDiskMoves)
		}
	}
	limit := func(x float64) bool { return x-boundSlack*(1+math.Abs(x)) > w.best+estimateWindow }
	for _, ii32 := range bs.order {
		ii := int(ii32)
		in := &s.insts[ii]
		h := 2*int(b.shape[ii]) + fbOf(in)
		k := bs.key[ii]
		if limit(k + bs.tMin[h]) {
			break
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
