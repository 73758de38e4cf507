package ganeti

import (
	"math"
	"slices"
)

func mathFloor(f float64) float64 { return math.Floor(f) }

// computePDsk is Ganeti's free-disk ratio; a node without disk counts as
// entirely free.
func computePDsk(free int, total float64) float64 {
	if total == 0 {
		return 1
	}
	return float64(free) / total
}

func newNodeState(n *Node) nodeState {
	s := nodeState{
		tMem: n.TotalMem, nMem: n.NodeMem, tDsk: n.TotalDisk,
		tCPU: n.TotalCPU, cpuSpeed: n.CPUSpeed, nCPU: n.OSCPUs,
		tSpindles:   n.Spindles,
		exclStorage: n.ExclStorage,
		failN1:      true,
		offline:     n.Offline,
		master:      n.Master,
		utilPool:    baseUtil,
		group:       n.Group,
	}
	s.cur = newUsage(n)
	s.fth = s.cur
	s.loDsk = 0 // Ganeti's default reserved disk ratio is 0
	return s
}

func (n *nodeState) calcSpindleUse(add bool, in *instState, cur float64) float64 {
	if n.exclStorage {
		return 0
	}
	if !in.usesLocal() {
		return cur
	}
	if add {
		return cur + float64(in.spindleUse)
	}
	return cur - float64(in.spindleUse)
}

func (n *nodeState) calcFreeSpindles(add bool, in *instState, cur int) int {
	if !n.exclStorage {
		return 0
	}
	if in.spindles < 0 {
		if add {
			return -1
		}
		return cur
	}
	if add {
		return cur - in.spindles
	}
	return cur + in.spindles
}

func (n *nodeState) newPDsk(freeSp, freeDsk int) float64 {
	if n.exclStorage {
		return computePDsk(freeSp, float64(n.tSpindles))
	}
	return computePDsk(freeDsk, n.tDsk)
}

func (n *nodeState) dsrdScore(in *instState) int {
	return len(in.dsrdTags) - intersectCount(in.dsrdTags, n.locTags)
}

func addCounts(m map[string]int, keys []string) map[string]int {
	if len(keys) == 0 {
		return m
	}
	out := make(map[string]int, len(m)+len(keys))
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		out[k]++
	}
	return out
}

func delCounts(m map[string]int, keys []string) map[string]int {
	if len(keys) == 0 {
		return m
	}
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		if v, ok := out[k]; ok {
			if v > 1 {
				out[k] = v - 1
			} else {
				delete(out, k)
			}
		}
	}
	return out
}

func (n *nodeState) locPairs(in *instState) [][2]string {
	if len(n.locTags) == 0 || len(in.exclTags) == 0 {
		return nil
	}
	var out [][2]string
	for _, l := range n.locTags {
		for _, e := range in.exclTags {
			out = append(out, [2]string{l, e})
		}
	}
	return out
}

func pairCounts(m map[[2]string]int, keys [][2]string, add bool) map[[2]string]int {
	if len(keys) == 0 {
		return m
	}
	out := make(map[[2]string]int, len(m)+len(keys))
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		if add {
			out[k]++
		} else if v, ok := out[k]; ok {
			if v > 1 {
				out[k] = v - 1
			} else {
				delete(out, k)
			}
		}
	}
	return out
}

// setPri records a primary instance at load time (Ganeti's Node.setPri):
// the node's free memory and disk already account for it. The reported
// free memory counts the running instances; the forthcoming copy takes the
// memory of the others too.
func (n *nodeState) setPri(in *instState) {
	if !in.forthcoming {
		n.nPri++
		n.cur.setPri(n, in, 0)
		n.locScore += in.locScore + n.dsrdScore(in)
		n.instMap = pairCounts(n.instMap, n.locPairs(in), true)
	}
	n.pTags = addCounts(n.pTags, in.exclTags)
	mem := 0
	if !in.usesMemory() {
		mem = in.mem
	}
	n.fth.setPri(n, in, mem)
}

// setSec records a secondary instance at load time (Ganeti's Node.setSec).
func (n *nodeState) setSec(in *instState) {
	if !in.forthcoming {
		n.nSec++
		n.cur.setSec(n, in)
	}
	n.fth.setSec(n, in)
}

// buildPeers computes the N+1 reserve from the node's secondaries.
func (n *nodeState) buildPeers(s *State, ni int) {
	var ps []peer
	for i := range s.insts {
		in := &s.insts[i]
		if in.sNode != ni || in.forthcoming {
			continue
		}
		mem := 0
		if in.usesSecMem() && !in.forthcoming {
			mem = in.mem
		}
		ps = peerAdd(ps, in.pNode, mem, true)
	}
	n.peers = ps
	n.rMem = maxPeer(ps)
	n.failN1 = n.cur.fMem < n.rMem
	n.pRem = float64(n.rMem) / n.tMem
}

func peerFind(ps []peer, pdx int) int {
	i, ok := slices.BinarySearchFunc(ps, pdx, func(p peer, k int) int { return p.pdx - k })
	if ok {
		return ps[i].mem
	}
	return 0
}

// peerAdd sets the entry of pdx in a new slice (copy on write); with
// accumulate it adds to the entry in place instead (loading only, when the
// slice is not shared yet).
func peerAdd(ps []peer, pdx, mem int, accumulate bool) []peer {
	i, ok := slices.BinarySearchFunc(ps, pdx, func(p peer, k int) int { return p.pdx - k })
	if accumulate {
		if ok {
			ps[i].mem += mem
			return ps
		}
		return slices.Insert(ps, i, peer{pdx, mem})
	}
	out := make([]peer, 0, len(ps)+1)
	out = append(out, ps[:i]...)
	out = append(out, peer{pdx, mem})
	if ok {
		out = append(out, ps[i+1:]...)
	} else {
		out = append(out, ps[i:]...)
	}
	return out
}

func peerRemove(ps []peer, pdx int) []peer {
	i, ok := slices.BinarySearchFunc(ps, pdx, func(p peer, k int) int { return p.pdx - k })
	if !ok {
		return ps
	}
	out := make([]peer, 0, len(ps))
	out = append(out, ps[:i]...)
	return append(out, ps[i+1:]...)
}

func maxPeer(ps []peer) int {
	m := 0
	for _, p := range ps {
		if p.mem > m {
			m = p.mem
		}
	}
	return m
}

// removePri is Ganeti's Node.removePri.
func (n *nodeState) removePri(in *instState) {
	n.pTags = delCounts(n.pTags, in.exclTags)
	n.fth.primary(n, false, in, in.mem)
	if in.forthcoming {
		return
	}
	n.nPri--
	n.cur.primary(n, false, in, in.usedMem())
	n.failN1 = n.cur.fMem <= n.rMem
	n.locScore -= in.locScore + n.dsrdScore(in)
	n.instMap = pairCounts(n.instMap, n.locPairs(in), false)
}

// removeSec is Ganeti's Node.removeSec. With dry the peer list is left
// stale (only the derived rMem is updated): for scoring, never for commit.
func (n *nodeState) removeSec(in *instState, dry bool) {
	n.fth.secondary(n, false, in, in.localDisk())
	if in.forthcoming {
		return
	}
	n.nSec--
	n.cur.secondary(n, false, in, in.localDisk())
	oldPeem := peerFind(n.peers, in.pNode)
	newPeem := oldPeem
	if in.usesSecMem() {
		newPeem -= in.mem
	}
	if oldPeem >= n.rMem {
		// The maximum over the peers with pNode's entry replaced (or
		// dropped when it reaches 0).
		m := 0
		for _, p := range n.peers {
			v := p.mem
			if p.pdx == in.pNode {
				v = newPeem
				if v <= 0 {
					continue
				}
			}
			m = max(m, v)
		}
		n.rMem = m
	}
	if !dry {
		if newPeem > 0 {
			n.peers = peerAdd(n.peers, in.pNode, newPeem, false)
		} else {
			n.peers = peerRemove(n.peers, in.pNode)
		}
	}
	n.pRem = float64(n.rMem) / n.tMem
	n.failN1 = n.cur.fMem <= n.rMem
}

// addPri is Ganeti's Node.addPriEx; force skips the soft checks. It reports
// whether the instance fits; n is modified only on success.
func (n *nodeState) addPri(in *instState, force bool) bool {
	strict := !force
	useDisk := in.usesLocal()
	fth := n.fth
	fth.primary(n, true, in, in.mem)
	fthHard, fthSoft := n.diskFits(&fth)
	fthBad := fth.fMem <= 0 || (useDisk && (fthHard || fthSoft)) || n.cpuOver(&fth)
	apply := func() {
		n.pTags = addCounts(n.pTags, in.exclTags)
		n.fth = fth
	}
	if in.forthcoming {
		return addForthcoming(strict, fthBad, apply)
	}
	cur := n.cur
	cur.primary(n, true, in, in.usedMem())
	hard, soft := n.diskFits(&cur)
	newFailN1 := cur.fMem <= n.rMem
	switch {
	case cur.fMem <= 0,
		useDisk && hard,
		strict && useDisk && soft,
		strict && newFailN1 && !n.failN1,
		strict && n.cpuOver(&cur),
		strict && rejectTags(n.pTags, in.exclTags),
		strict && fthBad:
		return false
	}
	apply()
	n.nPri++
	n.cur = cur
	n.failN1 = newFailN1
	n.locScore += in.locScore + n.dsrdScore(in)
	n.instMap = pairCounts(n.instMap, n.locPairs(in), true)
	return true
}

// addForthcoming ends addPri and addSec for a forthcoming instance, which
// only the forthcoming counters see: unless a strict check finds them
// short, apply stores them and the instance fits.
func addForthcoming(strict, bad bool, apply func()) bool {
	if strict && bad {
		return false
	}
	apply()
	return true
}

func rejectTags(m map[string]int, tags []string) bool {
	for _, t := range tags {
		if _, ok := m[t]; ok {
			return true
		}
	}
	return false
}

// addSec is Ganeti's Node.addSecExEx with ignoreDisks false; pdx is the
// instance's (new) primary node. dry is as for removeSec.
func (n *nodeState) addSec(in *instState, pdx int, force, dry bool) bool {
	return n.addSecBase(in, pdx, peerFind(n.peers, pdx), force, dry)
}

// addSecBase is addSec with the memory the node already reserves for pdx
// given as base. The result grows with base (rMem, pRem, N+1 failure), and
// only the soft checks depend on it; the DRBD bound evaluates it at the
// least and the largest base a peer can have.
func (n *nodeState) addSecBase(in *instState, pdx, base int, force, dry bool) bool {
	strict := !force
	secMem := 0
	if in.usesSecMem() {
		secMem = in.mem
	}
	newPeem := base + secMem
	fth := n.fth
	fth.secondary(n, true, in, in.dsk)
	fthHard, fthSoft := n.diskFits(&fth)
	fthBad := !in.hasSecondary() || fthHard || fthSoft || secMem >= n.fth.fMem
	if in.forthcoming {
		return addForthcoming(strict, fthBad, func() { n.fth = fth })
	}
	cur := n.cur
	cur.secondary(n, true, in, in.dsk)
	hard, soft := n.diskFits(&cur)
	newRMem := max(n.rMem, newPeem)
	newFailN1 := cur.fMem <= newRMem
	switch {
	case !in.hasSecondary(),
		hard,
		strict && soft,
		strict && secMem >= cur.fMem,
		strict && newFailN1 && !n.failN1,
		strict && fthBad:
		return false
	}
	n.fth = fth
	n.nSec++
	if !dry {
		n.peers = peerAdd(n.peers, pdx, newPeem, false)
	}
	n.failN1 = newFailN1
	n.rMem = newRMem
	n.cur = cur
	n.pRem = float64(newRMem) / n.tMem
	return true
}

// migrationOK is Ganeti's Node.checkMigration.
func migrationOK(src, dst *nodeState) bool { return isSubset(src.migTags, dst.rmigTags) }
