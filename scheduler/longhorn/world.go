package longhorn

import (
	"slices"
	"time"
)

// Refusal reasons, counted per node (when the node itself is filtered out)
// or per disk (when the node passes and its disks do not).
const (
	ReasonNodeDeleting          = "node being deleted"
	ReasonNodeNotReady          = "node not ready"
	ReasonNodeNotSchedulable    = "node not schedulable"
	ReasonNodeSchedulingOff     = "node scheduling disabled"
	ReasonNodeEvicting          = "node eviction requested"
	ReasonNodeAffinity          = "hard node affinity not satisfied"
	ReasonNodeTags              = "node tags not fulfilled"
	ReasonZoneAntiAffinity      = "hard zone anti-affinity"
	ReasonNodeAntiAffinity      = "hard node anti-affinity"
	ReasonNoDisks               = "node has no disks"
	ReasonDiskNoStatus          = "disk status missing"
	ReasonDiskSchedulingOff     = "disk scheduling disabled"
	ReasonDiskEvicting          = "disk eviction requested"
	ReasonDiskNotSchedulable    = "disk not schedulable"
	ReasonDiskType              = "disk type mismatch"
	ReasonDiskTags              = "disk tags not fulfilled"
	ReasonInsufficientStorage   = "insufficient storage"
	ReasonOverProvisioning      = "over-provisioning limit"
	ReasonDiskAntiAffinity      = "hard disk anti-affinity"
	ReasonPressureUnsafe        = "target would be under disk pressure"
	ReasonSourceDisk            = "disk already holds the replica"
	ReasonNotBalanceTarget      = "not a balancing target"
	ReasonReplicaLeftDiskBefore = "replica left this disk before"
)

// maxReusableRetries is Longhorn's limit on rebuild retries of a failed
// replica that may still be reused.
const maxReusableRetries = 5

// world is the mutable simulation over an immutable Cluster: disk usage and
// replica positions change as the planners place and move replicas. Nodes
// are kept ordered by an upper bound of their placement score so that the
// best node is usually found after looking at a few.
type world struct {
	c   *Cluster
	now time.Time

	avail, sched     []int64 // per disk
	repNode, repDisk []int   // per replica; -1 when unscheduled
	left             map[int][]int

	nodeReason []string // per node: volume-independent gate, "" when open
	diskReason []string // per disk: volume-independent eligibility, "" when open
	ub         []int64  // per node: sum of usable bytes of its open disks
	order      []int    // node indices by (ub desc, name asc)
	pos        []int    // position of each node in order

	openBySel map[string]*openSet // open nodes per node selector, built on first use
	held      []HeldDisk          // pressured disks that gave up nothing in the last pass

	// checkChoice, when set (by tests), sees every decision of choose.
	checkChoice func(vc *volCtx, req *request, got int)
}

func newWorld(c *Cluster, now time.Time) *world {
	w := &world{
		c:          c,
		now:        now,
		avail:      make([]int64, len(c.disks)),
		sched:      make([]int64, len(c.disks)),
		repNode:    slices.Clone(c.repNode),
		repDisk:    slices.Clone(c.repDisk),
		left:       map[int][]int{},
		nodeReason: make([]string, len(c.Nodes)),
		diskReason: make([]string, len(c.disks)),
		ub:         make([]int64, len(c.Nodes)),
		order:      make([]int, len(c.Nodes)),
		pos:        make([]int, len(c.Nodes)),
	}
	for i, d := range c.disks {
		w.avail[i], w.sched[i] = d.StorageAvailable, d.StorageScheduled
		w.diskReason[i] = staticDiskReason(d)
	}
	for i, n := range c.Nodes {
		w.nodeReason[i] = nodeGateReason(n)
		w.ub[i] = w.nodeBound(i)
		w.order[i] = i
	}
	slices.SortFunc(w.order, w.cmpOrder)
	for p, n := range w.order {
		w.pos[n] = p
	}
	return w
}

func (w *world) cmpOrder(a, b int) int {
	switch {
	case w.ub[a] > w.ub[b]:
		return -1
	case w.ub[a] < w.ub[b]:
		return 1
	}
	return cmpString(w.c.Nodes[a].Name, w.c.Nodes[b].Name)
}

// nodeGateReason is step 1 of the filter pipeline.
func nodeGateReason(n *Node) string {
	switch {
	case n.Deleting:
		return ReasonNodeDeleting
	case !n.Ready:
		return ReasonNodeNotReady
	case !n.Schedulable:
		return ReasonNodeNotSchedulable
	case !n.AllowScheduling:
		return ReasonNodeSchedulingOff
	case n.EvictionRequested:
		return ReasonNodeEvicting
	}
	return ""
}

// staticDiskReason is step 3: the disk's own switches and condition.
func staticDiskReason(d *Disk) string {
	switch {
	case !d.HasStatus:
		return ReasonDiskNoStatus
	case !d.AllowScheduling:
		return ReasonDiskSchedulingOff
	case d.EvictionRequested:
		return ReasonDiskEvicting
	case !d.Schedulable:
		return ReasonDiskNotSchedulable
	}
	return ""
}

// usable is LEP 20251001's usable space: available − reserved − scheduled,
// at least 0.
func (w *world) usable(d int) int64 {
	u, res, sched := w.avail[d], w.c.disks[d].StorageReserved, w.sched[d]
	if u <= res {
		return 0
	}
	u -= res
	if u <= sched {
		return 0
	}
	return u - sched
}

func (w *world) nodeBound(n int) int64 {
	if w.nodeReason[n] != "" {
		return -1
	}
	var s int64
	for _, d := range w.c.Nodes[n].Disks {
		if w.diskReason[d.idx] == "" {
			s = satAdd(s, w.usable(d.idx))
		}
	}
	return s
}

func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

// touch recomputes node n's bound after one of its disks changed and moves
// it to its place in the order.
func (w *world) touch(n int) {
	w.ub[n] = w.nodeBound(n)
	p := w.pos[n]
	for p > 0 && w.cmpOrder(n, w.order[p-1]) < 0 {
		w.order[p] = w.order[p-1]
		w.pos[w.order[p]] = p
		p--
	}
	for p < len(w.order)-1 && w.cmpOrder(n, w.order[p+1]) > 0 {
		w.order[p] = w.order[p+1]
		w.pos[w.order[p]] = p
		p++
	}
	w.order[p] = n
	w.pos[n] = p
}

// capacityReason is the one capacity predicate of section 1.3, used by
// placement and by every rebalancing move:
//
//	max > 0 and avail > 0
//	(avail − actual) > floor(max × minimalAvailable% / 100)        (strict)
//	(size + scheduled) ≤ floor((max − reserved) × overProvisioning% / 100)
//
// It returns "" when the replica fits, else the reason.
func (w *world) capacityReason(d int, size, actual int64) string {
	disk := w.c.disks[d]
	s := &w.c.Settings
	maxB, avail := disk.StorageMaximum, w.avail[d]
	if maxB <= 0 || avail <= 0 {
		return ReasonInsufficientStorage
	}
	free := avail - actual
	if free <= 0 || !mul(maxB, s.StorageMinimalAvailablePercentage).less(mul(free, 100)) {
		return ReasonInsufficientStorage
	}
	limit := maxB - disk.StorageReserved
	if limit < 0 {
		return ReasonOverProvisioning
	}
	need := sum3(size, w.sched[d], 0).mulU(100)
	if mul(limit, s.StorageOverProvisioningPercentage).less(need) {
		return ReasonOverProvisioning
	}
	return ""
}

// underPressure reports section 1.5's pressure: with threshold T ≠ 0,
// floor(max(0, avail − reserved) × 100 / max) < 100 − T.
func (w *world) underPressure(d int) bool {
	return w.pressuredAt(d, w.avail[d])
}

func (w *world) pressuredAt(d int, avail int64) bool {
	t := w.c.Settings.ReplicaAutoBalanceDiskPressurePercentage
	disk := w.c.disks[d]
	if t == 0 || disk.StorageMaximum <= 0 {
		return false
	}
	unused := max(avail-disk.StorageReserved, 0)
	return mul(unused, 100).less(mul(disk.StorageMaximum, 100-t))
}

// pressureSafe is the extra condition on a pressure move's target: Longhorn's
// floor((actual + scheduled + reserved) × 100 / max) < T, and the target not
// itself under pressure once the replica's actual size is on it (so a move
// never creates the pressure that would move it back).
func (w *world) pressureSafe(d int, actual int64) bool {
	t := w.c.Settings.ReplicaAutoBalanceDiskPressurePercentage
	disk := w.c.disks[d]
	if t == 0 || disk.StorageMaximum <= 0 {
		return false
	}
	if !sum3(actual, w.sched[d], disk.StorageReserved).mulU(100).less(mul(disk.StorageMaximum, t)) {
		return false
	}
	return !w.pressuredAt(d, w.avail[d]-actual)
}

// take and free never overflow: sizes are non-negative and capacity has
// been checked, but the state may hold values near the int64 limit.
func (w *world) take(d int, size, actual int64) {
	w.sched[d] = satAdd(w.sched[d], size)
	w.avail[d] = max(w.avail[d]-actual, 0)
	w.touch(w.c.disks[d].node)
}

func (w *world) free(d int, size, actual int64) {
	w.sched[d] = max(w.sched[d]-size, 0)
	w.avail[d] = satAdd(w.avail[d], actual)
	w.touch(w.c.disks[d].node)
}

// move applies a planned move of replica r to disk d.
func (w *world) move(r, d int) {
	v := w.c.Volumes[w.c.repVol[r]]
	from := w.repDisk[r]
	w.left[r] = append(w.left[r], from)
	w.free(from, v.Size, v.ActualSize)
	w.take(d, v.Size, v.ActualSize)
	w.repDisk[r] = d
	w.repNode[r] = w.c.disks[d].node
}

// tagsMatch is step 6 and the disk selector of step 8: every selector tag
// must be present; an empty selector matches everything when allowEmpty,
// else only untagged objects.
func tagsMatch(selector, tags []string, allowEmpty bool) bool {
	if len(selector) == 0 {
		return allowEmpty || len(tags) == 0
	}
	for _, s := range selector {
		if !slices.Contains(tags, s) {
			return false
		}
	}
	return true
}

// use counts a volume's replicas on a node or in a zone.
type use struct{ n, evicting int }

func (u use) used() bool         { return u.n > 0 }
func (u use) onlyEvicting() bool { return u.n > 0 && u.n == u.evicting }

// volCtx is what one volume's decisions depend on: its effective rules and
// where its replicas are (step 5).
type volCtx struct {
	w        *world
	vi       int
	v        *Volume
	nodeSoft bool
	zoneSoft bool
	diskSoft bool
	// Where the volume's replicas are: a few entries each, so short
	// slices scanned linearly beat maps on the hot path.
	nodeUse []keyUse // key: node index
	zoneUse []keyUse // key: zone index
	diskUse []keyUse // key: disk index; use.n is the replica count
}

type keyUse struct {
	key int
	use
}

func lookup(list []keyUse, key int) use {
	for _, e := range list {
		if e.key == key {
			return e.use
		}
	}
	return use{}
}

func bump(list []keyUse, key int, evicting bool) []keyUse {
	i := 0
	for i < len(list) && list[i].key != key {
		i++
	}
	if i == len(list) {
		list = append(list, keyUse{key: key})
	}
	list[i].n++
	if evicting {
		list[i].evicting++
	}
	return list
}

// nodeU, zoneU (of node n's zone) and diskU return the volume's use.
func (vc *volCtx) nodeU(n int) use { return lookup(vc.nodeUse, n) }
func (vc *volCtx) zoneU(n int) use { return lookup(vc.zoneUse, vc.w.c.nodeZoneIdx[n]) }
func (vc *volCtx) diskU(d int) int { return lookup(vc.diskUse, d).n }

// reusable reports whether a failed replica may still be reused.
func reusable(r *Replica, node, disk int) bool {
	return node >= 0 && disk >= 0 && r.RebuildRetryCount < maxReusableRetries && !r.EvictionRequested
}

// waitExpired reports whether the replenishment wait of a degraded volume is
// over (a volume without lastDegradedAt has nothing to wait for).
func (w *world) waitExpired(v *Volume) bool {
	if v.LastDegradedAt.IsZero() {
		return true
	}
	return !w.now.Before(v.LastDegradedAt.Add(w.c.Settings.ReplicaReplenishmentWaitInterval))
}

// counts reports whether replica r is "used" by step 5: scheduled, not being
// deleted, and if failed then still reusable within the replenishment wait.
func (w *world) counts(r int) bool {
	rep := w.c.Replicas[r]
	if w.repNode[r] < 0 || rep.Deleting {
		return false
	}
	if rep.FailedAt != "" {
		v := w.c.Volumes[w.c.repVol[r]]
		return reusable(rep, w.repNode[r], w.repDisk[r]) && !w.waitExpired(v)
	}
	return true
}

func (w *world) volume(vi, skip int) *volCtx {
	v := w.c.Volumes[vi]
	s := &w.c.Settings
	vc := &volCtx{
		w: w, vi: vi, v: v,
		nodeSoft: effectiveSoft(v.ReplicaSoftAntiAffinity, s.ReplicaSoftAntiAffinity),
		zoneSoft: effectiveSoft(v.ReplicaZoneSoftAntiAffinity, s.ReplicaZoneSoftAntiAffinity),
		diskSoft: effectiveSoft(v.ReplicaDiskSoftAntiAffinity, s.ReplicaDiskSoftAntiAffinity),
	}
	for _, r := range w.c.volReps[vi] {
		if r == skip || !w.counts(r) {
			continue
		}
		vc.add(w.repDisk[r], w.c.Replicas[r].EvictionRequested)
	}
	return vc
}

// add records a replica of the volume on disk d.
func (vc *volCtx) add(d int, evicting bool) {
	n := vc.w.c.disks[d].node
	vc.nodeUse = bump(vc.nodeUse, n, evicting)
	vc.zoneUse = bump(vc.zoneUse, vc.w.c.nodeZoneIdx[n], evicting)
	vc.diskUse = bump(vc.diskUse, d, evicting)
}

// tiers returns step 7's node tiers, in order.
func (vc *volCtx) tiers() []func(n int) bool {
	unusedNode := func(n int) bool { return !vc.nodeU(n).used() }
	unusedBoth := func(n int) bool { return unusedNode(n) && !vc.zoneU(n).used() }
	switch {
	case !vc.zoneSoft:
		return []func(int) bool{unusedBoth, func(n int) bool {
			return vc.nodeU(n).onlyEvicting() && vc.zoneU(n).onlyEvicting()
		}}
	case !vc.nodeSoft:
		return []func(int) bool{unusedBoth, unusedNode, func(n int) bool { return vc.nodeU(n).onlyEvicting() }}
	default:
		return []func(int) bool{unusedBoth, unusedNode, func(n int) bool { return vc.nodeU(n).used() }}
	}
}

// request describes one replica to place.
type request struct {
	pin         int              // node index the replica must go to, -1 for any
	pinMissing  bool             // the replica's hardNodeAffinity names no node
	allow       func(n int) bool // extra node restriction (balancing), nil for none
	excludeDisk int              // a disk that may not be chosen (the replica's own), -1 for none
	rep         int              // replica being moved (for the no-return rule), -1 for a new one
	pressure    bool             // the target must be pressure-safe
	tier        int              // set by search: the tier the chosen disk came from
}

func newRequest() request { return request{pin: -1, excludeDisk: -1, rep: -1} }

// volumeNodeReason is step 6 for node n (after the gate).
func (vc *volCtx) volumeNodeReason(n int) string {
	s := &vc.w.c.Settings
	if !tagsMatch(vc.v.NodeSelector, vc.w.c.Nodes[n].Tags, s.AllowEmptyNodeSelectorVolume) {
		return ReasonNodeTags
	}
	return ""
}

// diskReason is step 8 (and the move-specific limits) for disk d.
func (vc *volCtx) diskReason(d int, req *request) string {
	w := vc.w
	if r := w.diskReason[d]; r != "" {
		return r
	}
	disk := w.c.disks[d]
	want := "filesystem"
	if vc.v.DataEngine == "v2" {
		want = "block"
	}
	if disk.Type != want {
		return ReasonDiskType
	}
	if !tagsMatch(vc.v.DiskSelector, disk.Tags, w.c.Settings.AllowEmptyDiskSelectorVolume) {
		return ReasonDiskTags
	}
	if d == req.excludeDisk {
		return ReasonSourceDisk
	}
	if req.rep >= 0 && slices.Contains(w.left[req.rep], d) {
		return ReasonReplicaLeftDiskBefore
	}
	if r := w.capacityReason(d, vc.v.Size, vc.v.ActualSize); r != "" {
		return r
	}
	if req.pressure && !w.pressureSafe(d, vc.v.ActualSize) {
		return ReasonPressureUnsafe
	}
	return ""
}

// nodeOpen reports whether node n passes the node-level filters for req.
func (vc *volCtx) nodeOpen(n int, req *request) bool {
	if req.pinMissing || (req.pin >= 0 && n != req.pin) {
		return false
	}
	if req.allow != nil && !req.allow(n) {
		return false
	}
	return vc.w.nodeReason[n] == "" && vc.volumeNodeReason(n) == ""
}

// choose runs steps 7 to 11 and returns the chosen disk, or -1.
func (vc *volCtx) choose(req *request) int {
	d := vc.search(req)
	if vc.w.checkChoice != nil {
		vc.w.checkChoice(vc, req, d)
	}
	return d
}

func (vc *volCtx) search(req *request) int {
	w := vc.w
	nodes := w.order
	if req.pin >= 0 {
		nodes = []int{req.pin}
	}
	for ti, inTier := range vc.tiers() {
		req.tier = ti
		// Disk anti-affinity (1.2) over the tier: the fewest replicas of
		// this volume per disk; hard mode accepts only disks with none.
		minCount := -1
	scan:
		for _, n := range nodes {
			if w.ub[n] < 0 {
				if req.pin < 0 {
					break // closed nodes sort last
				}
				continue
			}
			if !inTier(n) || !vc.nodeOpen(n, req) {
				continue
			}
			for _, d := range w.c.Nodes[n].Disks {
				if vc.diskReason(d.idx, req) != "" {
					continue
				}
				k := vc.diskU(d.idx)
				if minCount < 0 || k < minCount {
					minCount = k
				}
				if minCount == 0 {
					break scan
				}
			}
		}
		if minCount < 0 || (!vc.diskSoft && minCount > 0) {
			continue
		}
		// Best disk (1.4): the node with the most usable space over its
		// candidate disks, then its disk with the most; ties by name.
		best, bestScore := -1, int64(-1)
		for _, n := range nodes {
			if best >= 0 && w.ub[n] < bestScore {
				break // the bound is sorted: no later node can reach bestScore
			}
			if w.ub[n] < 0 || !inTier(n) || !vc.nodeOpen(n, req) {
				continue
			}
			score, any := int64(0), false
			for _, d := range w.c.Nodes[n].Disks {
				if vc.diskU(d.idx) != minCount || vc.diskReason(d.idx, req) != "" {
					continue
				}
				score, any = satAdd(score, w.usable(d.idx)), true
			}
			if any && (score > bestScore || (score == bestScore && cmpString(w.c.Nodes[n].Name, w.c.Nodes[best].Name) < 0)) {
				best, bestScore = n, score
			}
		}
		if best < 0 {
			continue
		}
		bestDisk := -1
		for _, d := range w.c.Nodes[best].Disks {
			if vc.diskU(d.idx) != minCount || vc.diskReason(d.idx, req) != "" {
				continue
			}
			if bestDisk < 0 || w.usable(d.idx) > w.usable(bestDisk) {
				bestDisk = d.idx
			}
		}
		return bestDisk
	}
	return -1
}

// reasons explains why choose found nothing, counting per node or per disk.
func (vc *volCtx) reasons(req *request) map[string]int {
	w := vc.w
	out := map[string]int{}
	tiers := vc.tiers()
	for n, node := range w.c.Nodes {
		if req.pinMissing || (req.pin >= 0 && n != req.pin) {
			out[ReasonNodeAffinity]++
			continue
		}
		if r := w.nodeReason[n]; r != "" {
			out[r]++
			continue
		}
		if r := vc.volumeNodeReason(n); r != "" {
			out[r]++
			continue
		}
		if req.allow != nil && !req.allow(n) {
			out[ReasonNotBalanceTarget]++
			continue
		}
		inAny := false
		for _, t := range tiers {
			inAny = inAny || t(n)
		}
		if !inAny {
			if !vc.zoneSoft && vc.zoneU(n).used() {
				out[ReasonZoneAntiAffinity]++
			} else {
				out[ReasonNodeAntiAffinity]++
			}
			continue
		}
		if len(node.Disks) == 0 {
			out[ReasonNoDisks]++
			continue
		}
		for _, d := range node.Disks {
			if r := vc.diskReason(d.idx, req); r != "" {
				out[r]++
			} else {
				out[ReasonDiskAntiAffinity]++
			}
		}
	}
	return out
}
