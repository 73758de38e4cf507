package ganeti

// usage is the part of a node's book-keeping that Ganeti keeps twice: once
// for the committed instances (nodeState.cur: Node.hs's fMem, fDsk, uCpu,
// ...) and once with the forthcoming instances counted too (nodeState.fth:
// Node.hs's fMemForth, fDskForth, uCpuForth, ...). Both copies change
// through the same methods, so the committed and the forthcoming outcome of
// a placement are computed by one piece of code.
//
// Ganeti also stores each ratio (pMem, pDsk, pCpu and their Forth twins)
// and recomputes it whenever its counter changes; here the ratios are
// computed from the counters where they are read (ratios, cpuRatio), by
// the same formulas, so they are the same numbers.
type usage struct {
	fMem   int     // free memory
	fDsk   int     // free disk
	fSp    int     // free spindles (exclusive storage only)
	instSp float64 // the instances' spindle use (without exclusive storage)
	uCPU   int     // used virtual CPUs
	load   dynUtil // the instances' dynamic utilisation
}

// The methods below change the record in place, reading what they need of
// the node (exclusive storage) from n. A candidate is a copy changed by
// them, stored back when the placement fits.

// newUsage is the usage of a node as it reports itself.
func newUsage(node *Node) usage {
	return usage{fMem: node.FreeMem, fDsk: node.FreeDisk, fSp: node.FreeSpindles, uCPU: node.OSCPUs}
}

// addCPU adds (or removes) in's virtual CPUs when in is not offline.
func (u *usage) addCPU(add bool, in *instState) {
	if !in.notOffline() {
		return
	}
	if add {
		u.uCPU += in.vcpus
	} else {
		u.uCPU -= in.vcpus
	}
}

// setDisk sets the free disk to dsk as in is added (or removed): the free
// spindles (with exclusive storage) and the instances' spindle use
// (without) follow in's.
func (u *usage) setDisk(n *nodeState, add bool, in *instState, dsk int) {
	u.fDsk = dsk
	u.fSp = n.calcFreeSpindles(add, in, u.fSp)
	u.instSp = n.calcSpindleUse(add, in, u.instSp)
}

// primary adds (or removes) in as a primary instance taking mem of memory:
// its memory, local disk, virtual CPUs and utilisation (Ganeti's addPriEx
// and removePri, for either copy).
func (u *usage) primary(n *nodeState, add bool, in *instState, mem int) {
	if add {
		u.fMem -= mem
		u.setDisk(n, true, in, u.fDsk-in.localDisk())
		u.load = u.load.add(in.util)
	} else {
		u.fMem += mem
		u.setDisk(n, false, in, u.fDsk+in.localDisk())
		u.load = u.load.sub(in.util)
	}
	u.addCPU(add, in)
}

// secondary adds (or removes) in as a secondary instance taking dsk of
// disk: its disk and its disk utilisation. Ganeti's addSecExEx takes the
// instance's disk whatever its template (only DRBD passes its hard
// checks), removeSec gives back only local storage.
func (u *usage) secondary(n *nodeState, add bool, in *instState, dsk int) {
	if add {
		u.setDisk(n, true, in, u.fDsk-dsk)
		u.load.dsk += in.util.dsk
	} else {
		u.setDisk(n, false, in, u.fDsk+dsk)
		u.load.dsk -= in.util.dsk
	}
}

// setPri counts in as nodeState.setPri does (at load time), with mem the
// memory in takes beyond the reported free memory.
func (u *usage) setPri(n *nodeState, in *instState, mem int) {
	u.addCPU(true, in)
	u.load = u.load.add(in.util)
	u.fMem -= mem
	u.placed(n, in)
}

// setSec counts in as nodeState.setSec does (at load time).
func (u *usage) setSec(n *nodeState, in *instState) {
	u.load.dsk += in.util.dsk
	u.placed(n, in)
}

// placed counts in as the node reports its free memory and disk with in
// already on it (Ganeti's setPri and setSec at load time): in's spindle
// use is counted, and a forthcoming instance (which only the forthcoming
// copy sees, and which the reported free disk does not account for) takes
// its disk and spindles too.
func (u *usage) placed(n *nodeState, in *instState) {
	if !in.forthcoming {
		u.instSp = n.calcSpindleUse(true, in, u.instSp)
		return
	}
	u.setDisk(n, true, in, u.fDsk-in.localDisk())
}

// diskFits reports whether u breaks a hard disk check (no free disk left,
// spindles overcommitted with exclusive storage) and a soft one (below the
// reserved disk, spindle use over the policy's ratio).
func (n *nodeState) diskFits(u *usage) (hard, soft bool) {
	hard = u.fDsk <= 0 || (n.exclStorage && u.fSp < 0)
	soft = u.fDsk < n.loDsk || u.instSp > n.hiSpindles
	return hard, soft
}

// cpuRatio is Ganeti's pCpu: used virtual CPUs per physical CPU.
func (n *nodeState) cpuRatio(u *usage) float64 { return float64(u.uCPU) / n.tCPU }

// cpuOver reports whether u's virtual CPU ratio is over the node's limit
// (a negative limit: none).
func (n *nodeState) cpuOver(u *usage) bool {
	return n.vcpuRatio >= 0 && n.vcpuRatio < n.cpuRatio(u)
}

// ratios are u's scoring metrics: Ganeti's pMem (free memory ratio), pDsk
// (free disk ratio, of spindles with exclusive storage), pCpu per unit of
// CPU speed and the spindle use over the policy's limit.
func (n *nodeState) ratios(u *usage) (mem, dsk, cpu, sp float64) {
	return float64(u.fMem) / n.tMem, n.newPDsk(u.fSp, u.fDsk), n.cpuRatio(u) / n.cpuSpeed, u.instSp / n.hiSpindles
}
