package ganeti

// MoveKind is one of hbal's instance moves.
type MoveKind int

// Move kinds, named after Ganeti's IMove constructors.
const (
	Failover           MoveKind = iota // DRBD: swap primary and secondary
	Migrate                            // externally mirrored: move the primary to any node (FailoverToAny)
	ReplacePrimary                     // DRBD: f, r:new, f
	ReplaceSecondary                   // DRBD: r:new
	ReplaceAndFailover                 // DRBD: r:new, f
	FailoverAndReplace                 // DRBD: f, r:new
)

var moveKindNames = [...]string{"failover", "migrate", "replace-primary", "replace-secondary", "replace-and-failover", "failover-and-replace"}

func (k MoveKind) String() string {
	if int(k) < len(moveKindNames) && k >= 0 {
		return moveKindNames[k]
	}
	return "unknown"
}

// moveResult is the outcome of applying a move to the current state: up to
// three replaced nodes and the updated instance.
type moveResult struct {
	nn    int
	idx   [3]int
	nodes [3]nodeState
	inst  instState
}

// locScoreFor is Ganeti's setInstanceLocationScore.
func locScoreFor(a, b *nodeState) int { return intersectCount(a.locTags, b.locTags) }

// applyMove is Ganeti's applyMoveEx: it computes the nodes and instance
// after moving instance ii, without modifying s. ok is false when a hard
// check fails. With dry the peer lists of the result are stale (scoring
// only); commit needs a result computed without dry.
func (s *State) applyMove(ii int, kind MoveKind, tdx int, force, dry bool, r *moveResult) bool {
	in := &s.insts[ii]
	r.nn = 0
	r.inst = *in
	opdx, osdx := in.pNode, in.sNode
	op := &s.nodes[opdx]
	// slot copies node i into the result and returns it for updating.
	slot := func(k, i int) *nodeState {
		r.idx[k] = i
		r.nodes[k] = s.nodes[i]
		return &r.nodes[k]
	}
	switch kind {
	case Failover:
		if osdx < 0 {
			return false
		}
		os := &s.nodes[osdx]
		if !migrationOK(op, os) {
			return false
		}
		intP, intS := slot(0, opdx), slot(1, osdx)
		intP.removePri(in)
		intS.removeSec(in, dry)
		if !intS.addPri(in, op.offline || force) {
			return false
		}
		if !intP.addSec(in, osdx, false, dry) {
			return false
		}
		r.inst.pNode, r.inst.sNode = osdx, opdx
		r.nn = 2
	case Migrate:
		tn := &s.nodes[tdx]
		if !migrationOK(op, tn) {
			return false
		}
		newT := slot(1, tdx)
		if !newT.addPri(in, op.offline || force) {
			return false
		}
		slot(0, opdx).removePri(in)
		r.inst.pNode = tdx
		r.nn = 2
	case ReplacePrimary:
		if osdx < 0 {
			return false
		}
		os := &s.nodes[osdx]
		tn := &s.nodes[tdx]
		if !migrationOK(op, os) || !migrationOK(os, tn) {
			return false
		}
		intP, tmpS := slot(0, opdx), slot(1, osdx)
		intP.removePri(in)
		tmpS.removeSec(in, dry)
		r.inst.locScore = locScoreFor(tn, tmpS)
		r.inst.pNode = tdx
		ni := &r.inst
		forceP := op.offline || force
		if !tmpS.addPri(ni, forceP) {
			return false
		}
		tmpS.removePri(ni)
		newP := slot(2, tdx)
		if !newP.addPri(ni, forceP) {
			return false
		}
		if !tmpS.addSec(ni, tdx, forceP, dry) {
			return false
		}
		r.nn = 3
	case ReplaceSecondary:
		if osdx < 0 {
			return false
		}
		os := &s.nodes[osdx]
		tn := &s.nodes[tdx]
		pnode, intS := slot(0, opdx), slot(2, osdx)
		pnode.removePri(in)
		intS.removeSec(in, dry)
		forceS := os.offline || force
		r.inst.locScore = locScoreFor(op, tn)
		r.inst.sNode = tdx
		ni := &r.inst
		newS := slot(1, tdx)
		if !newS.addSec(ni, opdx, forceS, dry) {
			return false
		}
		if !pnode.addPri(ni, true) {
			return false
		}
		r.nn = 3
	case ReplaceAndFailover:
		if osdx < 0 {
			return false
		}
		os := &s.nodes[osdx]
		tn := &s.nodes[tdx]
		if !migrationOK(op, tn) {
			return false
		}
		intP, intS := slot(1, opdx), slot(2, osdx)
		intP.removePri(in)
		intS.removeSec(in, dry)
		r.inst.locScore = locScoreFor(tn, intP)
		r.inst.pNode, r.inst.sNode = tdx, opdx
		ni := &r.inst
		forceS := os.offline || force
		newP := slot(0, tdx)
		if !newP.addPri(ni, force) {
			return false
		}
		if !intP.addSec(ni, tdx, forceS, dry) {
			return false
		}
		r.nn = 3
	case FailoverAndReplace:
		if osdx < 0 {
			return false
		}
		os := &s.nodes[osdx]
		tn := &s.nodes[tdx]
		if !migrationOK(op, os) {
			return false
		}
		intS, intP := slot(1, osdx), slot(2, opdx)
		intP.removePri(in)
		intS.removeSec(in, dry)
		forceP := op.offline || force
		r.inst.locScore = locScoreFor(intS, tn)
		r.inst.pNode, r.inst.sNode = osdx, tdx
		ni := &r.inst
		if !intS.addPri(ni, forceP) {
			return false
		}
		newS := slot(0, tdx)
		if !newS.addSec(ni, osdx, forceP, dry) {
			return false
		}
		r.nn = 3
	default:
		return false
	}
	return true
}

// commit replaces the moved nodes and instance in s.
func (s *State) commit(ii int, r *moveResult) {
	for k := 0; k < r.nn; k++ {
		s.nodes[r.idx[k]] = r.nodes[k]
	}
	s.insts[ii] = r.inst
}
