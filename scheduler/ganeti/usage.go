package ganeti

// usage is the part of a node's book-keeping that Ganeti keeps twice: once
// for the committed instances (nodeState.cur: Node.hs's fMem, pMem, fDsk,
// ...) and once with the forthcoming instances counted too
// (nodeState.fth: Node.hs's fMemForth, pMemForth, fDskForth, ...). Both
// copies change through the same methods, so the committed and the
// forthcoming outcome of a placement are computed by one piece of code.
//
// Every ratio is kept next to its counter (pMem = fMem/tMem, ...), as
// Ganeti does, and recomputed whenever the counter changes.
type usage struct {
	fMem   int     // free memory
	pMem   float64 // fMem / tMem
	fDsk   int     // free disk
	pDsk   float64 // free disk (free spindles with exclusive storage) ratio
	fSp    int     // free spindles (exclusive storage only)
	instSp float64 // the instances' spindle use (without exclusive storage)
	uCPU   int     // used virtual CPUs
	pCPU   float64 // uCPU / tCPU
	load   dynUtil // the instances' dynamic utilisation
}

// newUsage is the usage of a node as it reports itself.
func (n *nodeState) newUsage(node *Node) usage {
	u := usage{fDsk: node.FreeDisk, fSp: node.FreeSpindles, uCPU: node.OSCPUs}
	u = n.withMem(u, node.FreeMem)
	u.pCPU = float64(u.uCPU) / n.tCPU
	u.pDsk = n.newPDsk(u.fSp, u.fDsk)
	return u
}

// withMem is u with free memory mem.
func (n *nodeState) withMem(u usage, mem int) usage {
	u.fMem = mem
	u.pMem = float64(mem) / n.tMem
	return u
}

// withCPU is u with in's virtual CPUs added (or removed) when in is not
// offline; the ratio is recomputed either way.
func (n *nodeState) withCPU(u usage, add bool, in *instState) usage {
	if in.notOffline() {
		if add {
			u.uCPU += in.vcpus
		} else {
			u.uCPU -= in.vcpus
		}
	}
	u.pCPU = float64(u.uCPU) / n.tCPU
	return u
}

// withDisk is u when in is added (or removed) and leaves dsk free: the free
// spindles (with exclusive storage) and the instances' spindle use
// (without) follow in's.
func (n *nodeState) withDisk(u usage, add bool, in *instState, dsk int) usage {
	u.fDsk = dsk
	u.fSp = n.calcFreeSpindles(add, in, u.fSp)
	u.instSp = n.calcSpindleUse(add, in, u.instSp)
	u.pDsk = n.newPDsk(u.fSp, u.fDsk)
	return u
}

// primary is u after in is added (or removed) as a primary instance taking
// mem of memory: its memory, local disk, virtual CPUs and utilisation
// (Ganeti's addPriEx and removePri, for either copy).
func (n *nodeState) primary(u usage, add bool, in *instState, mem int) usage {
	if add {
		u = n.withMem(u, u.fMem-mem)
		u = n.withDisk(u, true, in, u.fDsk-in.localDisk())
		u.load = u.load.add(in.util)
	} else {
		u = n.withMem(u, u.fMem+mem)
		u = n.withDisk(u, false, in, u.fDsk+in.localDisk())
		u.load = u.load.sub(in.util)
	}
	return n.withCPU(u, add, in)
}

// secondary is u after in is added (or removed) as a secondary instance
// taking dsk of disk: its disk and its disk utilisation. Ganeti's
// addSecExEx takes the instance's disk whatever its template (only DRBD
// passes its hard checks), removeSec gives back only local storage.
func (n *nodeState) secondary(u usage, add bool, in *instState, dsk int) usage {
	if add {
		u = n.withDisk(u, true, in, u.fDsk-dsk)
		u.load.dsk += in.util.dsk
	} else {
		u = n.withDisk(u, false, in, u.fDsk+dsk)
		u.load.dsk -= in.util.dsk
	}
	return u
}

// placed is u when the node reports its free memory and disk with in
// already on it (Ganeti's setPri and setSec at load time): in's spindle
// use is counted, and a forthcoming instance (which only the forthcoming
// copy sees, and which the reported free disk does not account for) takes
// its disk and spindles too.
func (n *nodeState) placed(u usage, in *instState) usage {
	if !in.forthcoming {
		u.instSp = n.calcSpindleUse(true, in, u.instSp)
		return u
	}
	return n.withDisk(u, true, in, u.fDsk-in.localDisk())
}

// diskFits reports whether u breaks a hard disk check (no free disk left,
// spindles overcommitted with exclusive storage) and a soft one (below the
// reserved disk, spindle use over the policy's ratio).
func (n *nodeState) diskFits(u usage) (hard, soft bool) {
	hard = u.fDsk <= 0 || (n.exclStorage && u.fSp < 0)
	soft = u.fDsk < n.loDsk || u.instSp > n.hiSpindles
	return hard, soft
}

// cpuOver reports whether u's virtual CPU ratio is over the node's limit
// (a negative limit: none).
func (n *nodeState) cpuOver(u usage) bool {
	return n.vcpuRatio >= 0 && n.vcpuRatio < u.pCPU
}

// ratios are u's scoring metrics: free memory, free disk, used CPUs per
// unit of CPU speed and spindle use over the policy's limit.
func (n *nodeState) ratios(u *usage) (mem, dsk, cpu, sp float64) {
	return u.pMem, u.pDsk, u.pCPU / n.cpuSpeed, u.instSp / n.hiSpindles
}
