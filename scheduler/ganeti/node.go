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
	speed := n.CPUSpeed
	s := nodeState{
		tMem: n.TotalMem, nMem: n.NodeMem, fMem: n.FreeMem, fMemFth: n.FreeMem,
		tDsk: n.TotalDisk, fDsk: n.FreeDisk, fDskFth: n.FreeDisk,
		tCPU: n.TotalCPU, cpuSpeed: speed, nCPU: n.OSCPUs, uCPU: n.OSCPUs, uCPUFth: n.OSCPUs,
		tSpindles: n.Spindles, fSpindles: n.FreeSpindles, fSpindFth: n.FreeSpindles,
		failN1:   true,
		pMem:     float64(n.FreeMem) / n.TotalMem,
		pMemFth:  float64(n.FreeMem) / n.TotalMem,
		pCPU:     float64(n.OSCPUs) / n.TotalCPU,
		pCPUFth:  float64(n.OSCPUs) / n.TotalCPU,
		offline:  n.Offline,
		master:   n.Master,
		utilPool: baseUtil,
		group:    n.Group,
	}
	s.exclStorage = n.ExclStorage
	if n.ExclStorage {
		s.pDsk = computePDsk(n.FreeSpindles, float64(n.Spindles))
	} else {
		s.pDsk = computePDsk(n.FreeDisk, n.TotalDisk)
	}
	s.pDskFth = s.pDsk
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
// the node's free memory and disk already account for it.
func (n *nodeState) setPri(in *instState) {
	if !in.forthcoming {
		n.nPri++
		if in.notOffline() {
			n.uCPU += in.vcpus
		}
		n.pCPU = float64(n.uCPU) / n.tCPU
		n.utilLoad = n.utilLoad.add(in.util)
		n.instSp = n.calcSpindleUse(true, in, n.instSp)
		n.locScore += in.locScore + n.dsrdScore(in)
		n.instMap = pairCounts(n.instMap, n.locPairs(in), true)
	}
	// Fields that include forthcoming instances.
	n.pTags = addCounts(n.pTags, in.exclTags)
	if in.notOffline() {
		n.uCPUFth += in.vcpus
	}
	n.pCPUFth = float64(n.uCPUFth) / n.tCPU
	n.utilLdFth = n.utilLdFth.add(in.util)
	if !in.usesMemory() {
		n.fMemFth -= in.mem
	}
	n.pMemFth = float64(n.fMemFth) / n.tMem
	n.setDiskFthAtLoad(in)
}

// setSec records a secondary instance at load time (Ganeti's Node.setSec).
func (n *nodeState) setSec(in *instState) {
	if !in.forthcoming {
		n.nSec++
		n.utilLoad.dsk += in.util.dsk
		n.instSp = n.calcSpindleUse(true, in, n.instSp)
	}
	n.utilLdFth.dsk += in.util.dsk
	n.setDiskFthAtLoad(in)
}

// setDiskFthAtLoad is the end of setPri and setSec: the forthcoming disk
// counters count in's spindle use, and for a forthcoming instance (which
// the node's free disk does not yet account for) its disk and spindles.
func (n *nodeState) setDiskFthAtLoad(in *instState) {
	if !in.forthcoming {
		n.instSpFth = n.calcSpindleUse(true, in, n.instSpFth)
		return
	}
	n.setDiskFth(n.diskAfter(true, in, n.fDskFth-in.localDisk(), n.fSpindFth, n.instSpFth))
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
	n.failN1 = n.fMem < n.rMem
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
	online := in.notOffline()
	// forthcoming fields
	n.pTags = delCounts(n.pTags, in.exclTags)
	n.fMemFth += in.mem
	n.setDiskFth(n.diskAfter(false, in, n.fDskFth+in.localDisk(), n.fSpindFth, n.instSpFth))
	n.pMemFth = float64(n.fMemFth) / n.tMem
	if online {
		n.uCPUFth -= in.vcpus
	}
	n.pCPUFth = float64(n.uCPUFth) / n.tCPU
	n.utilLdFth = n.utilLdFth.sub(in.util)
	if in.forthcoming {
		return
	}
	n.nPri--
	if in.usesMemory() {
		n.fMem += in.mem
	}
	n.setDisk(n.diskAfter(false, in, n.fDsk+in.localDisk(), n.fSpindles, n.instSp))
	n.pMem = float64(n.fMem) / n.tMem
	n.failN1 = n.fMem <= n.rMem
	if online {
		n.uCPU -= in.vcpus
	}
	n.pCPU = float64(n.uCPU) / n.tCPU
	n.utilLoad = n.utilLoad.sub(in.util)
	n.locScore -= in.locScore + n.dsrdScore(in)
	n.instMap = pairCounts(n.instMap, n.locPairs(in), false)
}

// removeSec is Ganeti's Node.removeSec. With dry the peer list is left
// stale (only the derived rMem is updated): for scoring, never for commit.
func (n *nodeState) removeSec(in *instState, dry bool) {
	n.setDiskFth(n.diskAfter(false, in, n.fDskFth+in.localDisk(), n.fSpindFth, n.instSpFth))
	n.utilLdFth.dsk -= in.util.dsk
	if in.forthcoming {
		return
	}
	n.nSec--
	n.setDisk(n.diskAfter(false, in, n.fDsk+in.localDisk(), n.fSpindles, n.instSp))
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
	n.failN1 = n.fMem <= n.rMem
	n.utilLoad.dsk -= in.util.dsk
}

// addPri is Ganeti's Node.addPriEx; force skips the soft checks. It reports
// whether the instance fits; n is modified only on success.
func (n *nodeState) addPri(in *instState, force bool) bool {
	strict := !force
	useDisk := in.usesLocal()
	online := in.notOffline()
	lCPU := n.vcpuRatio

	memFth := n.fMemFth - in.mem
	fth := n.diskAfter(true, in, n.fDskFth-in.localDisk(), n.fSpindFth, n.instSpFth)
	uCPUFth := n.uCPUFth
	if online {
		uCPUFth += in.vcpus
	}
	pCPUFth := float64(uCPUFth) / n.tCPU
	fthBad := memFth <= 0 ||
		(useDisk && fth.dsk <= 0) ||
		(useDisk && fth.dsk < n.loDsk) ||
		(useDisk && n.exclStorage && fth.sp < 0) ||
		(useDisk && fth.instSp > n.hiSpindles) ||
		(lCPU >= 0 && lCPU < pCPUFth)
	applyFth := func() {
		n.pTags = addCounts(n.pTags, in.exclTags)
		n.fMemFth = memFth
		n.pMemFth = float64(memFth) / n.tMem
		n.setDiskFth(fth)
		n.uCPUFth = uCPUFth
		n.pCPUFth = pCPUFth
		n.utilLdFth = n.utilLdFth.add(in.util)
	}
	if in.forthcoming {
		return addForthcoming(strict, fthBad, applyFth)
	}
	newMem := n.fMem
	if in.usesMemory() {
		newMem -= in.mem
	}
	d := n.diskAfter(true, in, n.fDsk-in.localDisk(), n.fSpindles, n.instSp)
	newFailN1 := newMem <= n.rMem
	newUCPU := n.uCPU
	if online {
		newUCPU += in.vcpus
	}
	newPCPU := float64(newUCPU) / n.tCPU
	switch {
	case newMem <= 0,
		useDisk && d.dsk <= 0,
		strict && useDisk && d.dsk < n.loDsk,
		useDisk && n.exclStorage && d.sp < 0,
		strict && useDisk && d.instSp > n.hiSpindles,
		strict && newFailN1 && !n.failN1,
		strict && lCPU >= 0 && lCPU < newPCPU,
		strict && rejectTags(n.pTags, in.exclTags),
		strict && fthBad:
		return false
	}
	applyFth()
	n.nPri++
	n.fMem = newMem
	n.failN1 = newFailN1
	n.pMem = float64(newMem) / n.tMem
	n.setDisk(d)
	n.uCPU = newUCPU
	n.pCPU = newPCPU
	n.utilLoad = n.utilLoad.add(in.util)
	n.locScore += in.locScore + n.dsrdScore(in)
	n.instMap = pairCounts(n.instMap, n.locPairs(in), true)
	return true
}

// diskFit is what a node's disk counters (the real ones or the forthcoming
// ones) become when an instance is added or removed: free disk, free spindles (with
// exclusive storage) and the instances' spindle use (without).
type diskFit struct {
	dsk, sp int
	instSp  float64
}

// diskAfter is diskFit when in is added (or removed) from the free disk
// it leaves and the current free spindles and spindle use.
func (n *nodeState) diskAfter(add bool, in *instState, dsk, sp int, instSp float64) diskFit {
	return diskFit{dsk: dsk, sp: n.calcFreeSpindles(add, in, sp), instSp: n.calcSpindleUse(add, in, instSp)}
}

// setDisk and setDiskFth store d as the real or the forthcoming counters.
func (n *nodeState) setDisk(d diskFit) {
	n.fDsk, n.pDsk, n.instSp, n.fSpindles = d.dsk, n.newPDsk(d.sp, d.dsk), d.instSp, d.sp
}

func (n *nodeState) setDiskFth(d diskFit) {
	n.fDskFth, n.pDskFth, n.instSpFth, n.fSpindFth = d.dsk, n.newPDsk(d.sp, d.dsk), d.instSp, d.sp
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
	fth := n.diskAfter(true, in, n.fDskFth-in.dsk, n.fSpindFth, n.instSpFth)
	fthBad := !in.hasSecondary() || fth.dsk <= 0 || fth.dsk < n.loDsk ||
		(n.exclStorage && fth.sp < 0) || fth.instSp > n.hiSpindles || secMem >= n.fMemFth
	if in.forthcoming {
		return addForthcoming(strict, fthBad, func() {
			n.setDiskFth(fth)
			n.utilLdFth.dsk += in.util.dsk
		})
	}
	oldMem := n.fMem
	d := n.diskAfter(true, in, n.fDsk-in.dsk, n.fSpindles, n.instSp)
	newRMem := max(n.rMem, newPeem)
	newFailN1 := oldMem <= newRMem
	switch {
	case !in.hasSecondary(),
		d.dsk <= 0,
		strict && d.dsk < n.loDsk,
		n.exclStorage && d.sp < 0,
		strict && d.instSp > n.hiSpindles,
		strict && secMem >= oldMem,
		strict && newFailN1 && !n.failN1,
		strict && fthBad:
		return false
	}
	n.setDiskFth(fth)
	n.utilLdFth.dsk += in.util.dsk
	n.nSec++
	if !dry {
		n.peers = peerAdd(n.peers, pdx, newPeem, false)
	}
	n.failN1 = newFailN1
	n.rMem = newRMem
	n.setDisk(d)
	n.pRem = float64(newRMem) / n.tMem
	n.utilLoad.dsk += in.util.dsk
	return true
}

// migrationOK is Ganeti's Node.checkMigration.
func migrationOK(src, dst *nodeState) bool { return isSubset(src.migTags, dst.rmigTags) }
