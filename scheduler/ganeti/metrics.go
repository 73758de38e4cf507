package ganeti

import (
	"math"
	"math/bits"
)

// Metric indices, weights and kinds: hbal's cluster score components in
// Ganeti's order.
const nMetrics = 20

const (
	mStdDev = iota
	mSumOnline
	mSumOffline
	mMap
)

var metricNames = [nMetrics]string{
	"free_mem_cv", "free_disk_cv", "n1_cnt", "reserved_mem_cv", "offline_all_cnt",
	"offline_pri_cnt", "vcpu_ratio_cv", "cpu_load_cv", "mem_load_cv", "disk_load_cv",
	"net_load_cv", "pri_tags_score", "spindles_cv", "free_mem_cv_forth", "free_disk_cv_forth",
	"vcpu_ratio_cv_forth", "spindles_cv_forth", "location_score", "location_exclusion_score",
	"reserved_mem_rtotal",
}

var metricWeights = [nMetrics]float64{0.5, 0.5, 1, 1, 4, 16, 0.5, 1, 1, 1, 1, 2, 0.5, 0.5, 0.5, 0.5, 0.5, 1, 1, 0.25}

var metricKinds = [nMetrics]int{
	mStdDev, mStdDev, mSumOnline, mStdDev, mSumOffline,
	mSumOffline, mStdDev, mStdDev, mStdDev, mStdDev,
	mStdDev, mSumOnline, mStdDev, mStdDev, mStdDev,
	mStdDev, mStdDev, mSumOnline, mMap, mSumOnline,
}

type metricVec [nMetrics]float64

// vector computes the node's per-metric values (Ganeti's compDetailedCVNode);
// the map metric is handled separately and left 0 here.
func (n *nodeState) vector() metricVec {
	var v metricVec
	v[0], v[1], v[6], v[12] = n.ratios(&n.cur)
	if n.failN1 {
		v[2] = float64(n.nSec + n.nPri)
	}
	v[3] = n.pRem
	v[4] = float64(n.nPri + n.nSec)
	v[5] = float64(n.nPri)
	v[7] = n.cur.load.cpu / n.utilPool.cpu
	v[8] = n.cur.load.mem / n.utilPool.mem
	v[9] = n.cur.load.dsk / n.utilPool.dsk
	v[10] = n.cur.load.net / n.utilPool.net
	sum := 0
	for _, c := range n.pTags {
		sum += c
	}
	v[11] = float64(sum - len(n.pTags))
	v[13], v[14], v[15], v[16] = n.ratios(&n.fth)
	v[17] = float64(n.locScore)
	v[19] = n.pRem
	return v
}

// exactScore computes the score exactly as Ganeti does (same operations in
// the same order), reading node i's vector from vec(i) and, for the map
// metric, its instance map from node(i).
func exactScore(nn int, vec func(int) *metricVec, node func(int) *nodeState, w *[nMetrics]float64) float64 {
	var nOn, nOff float64
	var sum [nMetrics]float64
	for i := 0; i < nn; i++ {
		v := vec(i)
		if node(i).offline {
			nOff++
			sum[4] += v[4]
			sum[5] += v[5]
			continue
		}
		nOn++
		for k := 0; k < nMetrics; k++ {
			if metricKinds[k] != mSumOffline {
				sum[k] += v[k]
			}
		}
	}
	var mean, nvar [nMetrics]float64
	for k := 0; k < nMetrics; k++ {
		if metricKinds[k] == mStdDev {
			mean[k] = sum[k] / nOn
		}
	}
	var mapCounts map[[2]string]int
	for i := 0; i < nn; i++ {
		nd := node(i)
		if nd.offline {
			continue
		}
		v := vec(i)
		for k := 0; k < nMetrics; k++ {
			if metricKinds[k] == mStdDev {
				d := v[k] - mean[k]
				nvar[k] = nvar[k] + float64(d*d)
			}
		}
		if len(nd.instMap) > 0 {
			if mapCounts == nil {
				mapCounts = map[[2]string]int{}
			}
			for key, c := range nd.instMap {
				mapCounts[key] += c
			}
		}
	}
	score := 0.0
	for k := 0; k < nMetrics; k++ {
		var val float64
		switch metricKinds[k] {
		case mStdDev:
			val = math.Sqrt(nvar[k] / nOn)
		case mMap:
			t := 0
			for _, c := range mapCounts {
				t += c
			}
			val = float64(t - len(mapCounts))
		default:
			val = sum[k]
		}
		score = score + float64(w[k]*val)
	}
	return score
}

// detailedScore returns the per-metric values (unweighted) computed exactly.
func detailedScore(nodes []nodeState) [nMetrics]float64 {
	var out [nMetrics]float64
	vecs := make([]metricVec, len(nodes))
	for i := range nodes {
		vecs[i] = nodes[i].vector()
	}
	for k := 0; k < nMetrics; k++ {
		var w [nMetrics]float64
		w[k] = 1
		out[k] = exactScore(len(nodes), func(i int) *metricVec { return &vecs[i] }, func(i int) *nodeState { return &nodes[i] }, &w)
	}
	return out
}

// aggregates are running sums over the nodes, shifted for precision, from
// which the score after replacing a few nodes is estimated in O(1).
type aggregates struct {
	nOn       float64
	shift     metricVec
	s, q      metricVec
	mapCounts map[[2]string]int
	mapVal    int
	hasMap    bool
	cur       metricVec // current value of every metric
	twins     bool      // metrics 7, 8 and 10 are equal on every node
	active    []int     // metrics estimate recomputes
	w         metricVec // their weights (twins folded)
	base      float64   // current score from the cached values
	invN      float64
	shiftSet  bool
}

// delta is the change one node makes to the running sums: for each metric
// in mask, the change of the (shifted) sum and sum of squares.
type delta struct {
	mask   uint32
	ds, dq metricVec
}

// delta computes the change of node (old -> new); offline tells whether the
// node is offline (it then only counts in the offline metrics).
func (a *aggregates) delta(old, new *metricVec, offline bool, d *delta) {
	d.mask = 0
	for _, k := range a.active {
		o, nw := old[k], new[k]
		if o == nw {
			continue
		}
		kind := metricKinds[k]
		if (kind == mSumOffline) != offline {
			continue
		}
		d.mask |= 1 << k
		if kind == mStdDev {
			o -= a.shift[k]
			nw -= a.shift[k]
			d.ds[k] = nw - o
			d.dq[k] = nw*nw - o*o
		} else {
			d.ds[k] = nw - o
			d.dq[k] = 0
		}
	}
}

// estimate2 is estimate for two nodes given as deltas (no map metric).
func (a *aggregates) estimate2(x, y *delta) float64 {
	score := a.base
	m := x.mask | y.mask
	for m != 0 {
		k := bits.TrailingZeros32(m)
		m &= m - 1
		var ds, dq float64
		if x.mask&(1<<k) != 0 {
			ds, dq = x.ds[k], x.dq[k]
		}
		if y.mask&(1<<k) != 0 {
			ds += y.ds[k]
			dq += y.dq[k]
		}
		var val float64
		if metricKinds[k] == mStdDev {
			val = a.sd(a.s[k]+ds, a.q[k]+dq)
		} else {
			val = a.s[k] + ds
		}
		score += a.w[k] * (val - a.cur[k])
	}
	return score
}

// build computes the aggregates from scratch. The shift (the reference the
// running sums are taken from) is the mean at the first build and then kept,
// so that cached deltas (see delta) stay valid across steps.
func (a *aggregates) build(nodes []nodeState, vecs []metricVec) {
	shift, shiftSet := a.shift, a.shiftSet
	active := a.active[:0]
	*a = aggregates{active: active}
	var raw metricVec
	for i := range nodes {
		if nodes[i].offline {
			raw[4] += vecs[i][4]
			raw[5] += vecs[i][5]
			continue
		}
		a.nOn++
		for k := 0; k < nMetrics; k++ {
			if metricKinds[k] != mSumOffline {
				raw[k] += vecs[i][k]
			}
		}
		if len(nodes[i].locTags) > 0 {
			// Location exclusion pairs can appear on this node.
			a.hasMap = true
		}
	}
	if shiftSet {
		a.shift = shift
	} else {
		for k := 0; k < nMetrics; k++ {
			if metricKinds[k] == mStdDev && a.nOn > 0 {
				a.shift[k] = raw[k] / a.nOn
			}
		}
	}
	a.shiftSet = true
	for i := range nodes {
		if nodes[i].offline {
			continue
		}
		for k := 0; k < nMetrics; k++ {
			if metricKinds[k] == mStdDev {
				d := vecs[i][k] - a.shift[k]
				a.s[k] += d
				a.q[k] += d * d
			}
		}
	}
	for k := 0; k < nMetrics; k++ {
		if metricKinds[k] != mStdDev {
			a.s[k] = raw[k]
		}
	}
	a.mapCounts = map[[2]string]int{}
	for i := range nodes {
		if nodes[i].offline {
			continue
		}
		for key, c := range nodes[i].instMap {
			a.mapCounts[key] += c
		}
	}
	for _, c := range a.mapCounts {
		a.mapVal += c - 1
	}
	a.invN = 1 / a.nOn
	a.twins = true
	for i := range vecs {
		if vecs[i][7] != vecs[i][8] || vecs[i][7] != vecs[i][10] {
			a.twins = false
		}
	}
	a.prepare()
}

// change is one node replaced by a new version.
type change struct {
	old, new *metricVec
	oldN     *nodeState
	newN     *nodeState
}

// prepare caches the current value of every metric so that estimate only
// recomputes the metrics a move changes, and the list of metrics estimate
// looks at (the load twins are folded into metric 7).
func (a *aggregates) prepare() {
	a.active = a.active[:0]
	for k := 0; k < nMetrics; k++ {
		a.w[k] = metricWeights[k]
		if metricKinds[k] == mMap || (a.twins && loadTwins[k]) {
			continue
		}
		a.active = append(a.active, k)
	}
	if a.twins {
		a.w[7] = metricWeights[7] + metricWeights[8] + metricWeights[10]
	}
	for k := 0; k < nMetrics; k++ {
		switch metricKinds[k] {
		case mStdDev:
			a.cur[k] = a.sd(a.s[k], a.q[k])
		case mMap:
			a.cur[k] = float64(a.mapVal)
		default:
			a.cur[k] = a.s[k]
		}
	}
	a.base = 0
	for k := 0; k < nMetrics; k++ {
		a.base += metricWeights[k] * a.cur[k]
	}
}

func (a *aggregates) sd(s, q float64) float64 {
	m := s * a.invN
	v := q*a.invN - m*m
	if v < 0 {
		v = 0
	}
	return math.Sqrt(v)
}

// loadTwins are metrics whose per-node values are always equal to metric 7
// (cpu, memory and network load all count primaries when every instance
// has the same unit utilisation); estimate computes them once.
var loadTwins = [nMetrics]bool{8: true, 10: true}

// estimate returns the score with the given nodes replaced. Metrics the
// change leaves alone contribute their cached value.
func (a *aggregates) estimate(ch []change) float64 {
	var ds, dq metricVec
	var touched [nMetrics]bool
	for i := range ch {
		c := &ch[i]
		off := c.oldN.offline
		for _, k := range a.active {
			o, nw := c.old[k], c.new[k]
			if o == nw {
				continue
			}
			kind := metricKinds[k]
			if (kind == mSumOffline) != off {
				continue
			}
			touched[k] = true
			if kind == mStdDev {
				o -= a.shift[k]
				nw -= a.shift[k]
				ds[k] += nw - o
				dq[k] += nw*nw - o*o
			} else {
				ds[k] += nw - o
			}
		}
	}
	score := a.base
	for _, k := range a.active {
		if !touched[k] {
			continue
		}
		var val float64
		if metricKinds[k] == mStdDev {
			val = a.sd(a.s[k]+ds[k], a.q[k]+dq[k])
		} else {
			val = a.s[k] + ds[k]
		}
		score += a.w[k] * (val - a.cur[k])
	}
	if a.hasMap {
		score += metricWeights[18] * (float64(a.mapEstimate(ch)) - a.cur[18])
	}
	return score
}

func (a *aggregates) mapEstimate(ch []change) int {
	delta := map[[2]string]int{}
	for _, c := range ch {
		if c.oldN.offline {
			continue
		}
		for k, v := range c.oldN.instMap {
			delta[k] -= v
		}
		if c.newN == nil {
			continue // ranking estimate without the node (see rankTargets)
		}
		for k, v := range c.newN.instMap {
			delta[k] += v
		}
	}
	val := a.mapVal
	for k, d := range delta {
		if d == 0 {
			continue
		}
		before := a.mapCounts[k]
		after := before + d
		if before > 0 {
			val -= before - 1
		}
		if after > 0 {
			val += after - 1
		}
	}
	return val
}
