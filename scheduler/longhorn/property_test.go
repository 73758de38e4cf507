package longhorn

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

var propNow = time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)

// randomCluster builds a small random cluster from seed: nodes in zones,
// with flags, tags and disks of every kind; volumes with overrides and
// selectors; replicas anywhere (even where the rules would not put them),
// some failed, evicting or unscheduled. Settings are random too.
func randomCluster(seed uint64) *Cluster {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	chance := func(p float64) bool { return r.Float64() < p }
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	subset := func(xs ...string) []string {
		var out []string
		for _, x := range xs {
			if chance(0.3) {
				out = append(out, x)
			}
		}
		return out
	}
	s := DefaultSettings()
	s.ReplicaSoftAntiAffinity = chance(0.5)
	s.ReplicaZoneSoftAntiAffinity = chance(0.6)
	s.ReplicaDiskSoftAntiAffinity = chance(0.6)
	s.StorageMinimalAvailablePercentage = []int64{0, 10, 25}[r.IntN(3)]
	s.StorageOverProvisioningPercentage = []int64{100, 150, 200}[r.IntN(3)]
	s.ReplicaAutoBalance = pick(AutoBalanceDisabled, AutoBalanceLeastEffort, AutoBalanceBestEffort, AutoBalanceBestEffort)
	s.ReplicaAutoBalanceDiskPressurePercentage = []int64{0, 50, 80, 90}[r.IntN(4)]
	s.AllowEmptyNodeSelectorVolume = chance(0.8)
	s.AllowEmptyDiskSelectorVolume = chance(0.8)
	c := &Cluster{Settings: s}
	zones := 1 + r.IntN(4)
	for i := range 2 + r.IntN(9) {
		n := &Node{
			Name: fmt.Sprintf("n%02d", i), Zone: fmt.Sprintf("z%d", r.IntN(zones)),
			Ready: !chance(0.08), Schedulable: !chance(0.05), AllowScheduling: !chance(0.05),
			EvictionRequested: chance(0.03), Deleting: chance(0.02), Tags: subset("a", "b"),
		}
		for j := range 1 + r.IntN(4) {
			maxB := int64(100 + r.IntN(900))
			d := &Disk{
				Name: fmt.Sprintf("d%d", j), UUID: fmt.Sprintf("u-%d-%d", i, j), Path: fmt.Sprintf("/mnt/%d", j),
				Type: "filesystem", AllowScheduling: !chance(0.05), EvictionRequested: chance(0.03),
				HasStatus: !chance(0.02), Schedulable: !chance(0.05), Tags: subset("x", "y"),
				StorageMaximum: maxB, StorageAvailable: int64(r.IntN(int(maxB) + 1)), StorageReserved: int64(r.IntN(int(maxB/5) + 1)),
			}
			if chance(0.1) {
				d.Type = "block"
			}
			if chance(0.5) {
				d.StorageAvailable = maxB - int64(r.IntN(int(maxB/4)+1))
			}
			n.Disks = append(n.Disks, d)
		}
		c.Nodes = append(c.Nodes, n)
	}
	for i := range 1 + r.IntN(12) {
		size := int64(1 + r.IntN(150))
		v := &Volume{
			Name: fmt.Sprintf("v%02d", i), Size: size, ActualSize: int64(r.IntN(int(size) + 1)),
			NumberOfReplicas:            1 + r.IntN(4),
			ReplicaSoftAntiAffinity:     pick("", "ignored", "enabled", "disabled"),
			ReplicaZoneSoftAntiAffinity: pick("", "ignored", "enabled", "disabled"),
			ReplicaDiskSoftAntiAffinity: pick("", "ignored", "enabled", "disabled"),
			ReplicaAutoBalance:          pick("", "ignored", AutoBalanceDisabled, AutoBalanceLeastEffort, AutoBalanceBestEffort),
			Robustness:                  pick("healthy", "healthy", "healthy", "degraded"),
		}
		if chance(0.2) {
			v.NodeSelector = subset("a", "b")
		}
		if chance(0.2) {
			v.DiskSelector = subset("x", "y")
		}
		if chance(0.08) {
			v.DataEngine = "v2"
		}
		if v.Robustness == "degraded" {
			v.LastDegradedAt = propNow.Add(-time.Duration(r.IntN(1200)) * time.Second)
		}
		// Most volumes are complete and healthy (what balancing acts on),
		// the others anything.
		complete := chance(0.6)
		count := r.IntN(v.NumberOfReplicas + 2)
		if complete {
			count, v.Robustness, v.LastDegradedAt = v.NumberOfReplicas, "healthy", time.Time{}
		}
		for k := range count {
			rep := &Replica{Name: fmt.Sprintf("%s-r%d", v.Name, k), VolumeName: v.Name, CurrentState: "running"}
			if complete {
				n := c.Nodes[r.IntN(len(c.Nodes))]
				d := n.Disks[r.IntN(len(n.Disks))]
				rep.NodeID, rep.DiskID = n.Name, d.UUID
				d.StorageScheduled += v.Size
				d.StorageAvailable = max(d.StorageAvailable-v.ActualSize, 0)
				c.Replicas = append(c.Replicas, rep)
				continue
			}
			if !chance(0.1) {
				n := c.Nodes[r.IntN(len(c.Nodes))]
				d := n.Disks[r.IntN(len(n.Disks))]
				rep.NodeID, rep.DiskID = n.Name, d.UUID
				d.StorageScheduled += v.Size
			} else if chance(0.3) {
				rep.HardNodeAffinity = c.Nodes[r.IntN(len(c.Nodes))].Name
			}
			if chance(0.1) {
				rep.FailedAt = "2026-01-01T00:00:00Z"
				rep.RebuildRetryCount = r.IntN(7)
			}
			rep.EvictionRequested = chance(0.05)
			rep.Deleting = chance(0.02)
			c.Replicas = append(c.Replicas, rep)
		}
		c.Volumes = append(c.Volumes, v)
	}
	return c
}

// shuffled returns a copy of c with every slice in a random order, as if
// the objects had come in another order.
func shuffled(c *Cluster, seed uint64) *Cluster {
	r := rand.New(rand.NewPCG(seed, 7))
	out := &Cluster{Settings: c.Settings}
	for _, n := range c.Nodes {
		nc := *n
		nc.Disks = nil
		for _, d := range n.Disks {
			dc := *d
			nc.Disks = append(nc.Disks, &dc)
		}
		r.Shuffle(len(nc.Disks), func(i, j int) { nc.Disks[i], nc.Disks[j] = nc.Disks[j], nc.Disks[i] })
		out.Nodes = append(out.Nodes, &nc)
	}
	for _, v := range c.Volumes {
		vc := *v
		out.Volumes = append(out.Volumes, &vc)
	}
	for _, rep := range c.Replicas {
		rc := *rep
		out.Replicas = append(out.Replicas, &rc)
	}
	r.Shuffle(len(out.Nodes), func(i, j int) { out.Nodes[i], out.Nodes[j] = out.Nodes[j], out.Nodes[i] })
	r.Shuffle(len(out.Volumes), func(i, j int) { out.Volumes[i], out.Volumes[j] = out.Volumes[j], out.Volumes[i] })
	r.Shuffle(len(out.Replicas), func(i, j int) { out.Replicas[i], out.Replicas[j] = out.Replicas[j], out.Replicas[i] })
	return out
}

// refChoose is a plain reference for choose: every tier, every node and disk
// looked at, no ordering or early stop.
func refChoose(vc *volCtx, req *request) int {
	w := vc.w
	for _, inTier := range vc.tiers() {
		var cands []int
		for n := range w.c.Nodes {
			if !inTier(n) || !vc.nodeOpen(n, req) {
				continue
			}
			for _, d := range w.c.Nodes[n].Disks {
				if vc.diskReason(d.idx, req) == "" {
					cands = append(cands, d.idx)
				}
			}
		}
		if len(cands) == 0 {
			continue
		}
		minCount := vc.diskU(cands[0])
		for _, d := range cands {
			minCount = min(minCount, vc.diskU(d))
		}
		if !vc.diskSoft && minCount > 0 {
			continue
		}
		score := map[int]int64{}
		for _, d := range cands {
			if vc.diskU(d) == minCount {
				score[w.c.disks[d].node] += w.usable(d)
			}
		}
		best := -1
		for n, s := range score {
			if best < 0 || s > score[best] || (s == score[best] && w.c.Nodes[n].Name < w.c.Nodes[best].Name) {
				best = n
			}
		}
		bestDisk := -1
		for _, d := range cands {
			if w.c.disks[d].node != best || vc.diskU(d) != minCount {
				continue
			}
			u, bu := w.usable(d), int64(-1)
			if bestDisk >= 0 {
				bu = w.usable(bestDisk)
			}
			if u > bu || (u == bu && w.c.disks[d].Name < w.c.disks[bestDisk].Name) {
				bestDisk = d
			}
		}
		return bestDisk
	}
	return -1
}

// hardRuleViolation checks a chosen disk against the hard rules and the
// capacity predicates, written out directly from the scheduler notes.
func hardRuleViolation(vc *volCtx, req *request, d int) string {
	w, v := vc.w, vc.v
	s := &w.c.Settings
	disk := w.c.disks[d]
	node := w.c.Nodes[disk.node]
	subset := func(sel, tags []string, allowEmpty bool) bool {
		if len(sel) == 0 {
			return allowEmpty || len(tags) == 0
		}
		for _, x := range sel {
			if !slices.Contains(tags, x) {
				return false
			}
		}
		return true
	}
	switch {
	case node.Deleting || !node.Ready || !node.Schedulable || !node.AllowScheduling || node.EvictionRequested:
		return "node gate"
	case !subset(v.NodeSelector, node.Tags, s.AllowEmptyNodeSelectorVolume):
		return "node tags"
	case !disk.HasStatus || !disk.AllowScheduling || disk.EvictionRequested || !disk.Schedulable:
		return "disk eligibility"
	case (v.DataEngine == "v2") != (disk.Type == "block"):
		return "disk type"
	case !subset(v.DiskSelector, disk.Tags, s.AllowEmptyDiskSelectorVolume):
		return "disk tags"
	case req.pin >= 0 && disk.node != req.pin:
		return "pinned node"
	case req.excludeDisk == d:
		return "source disk"
	}
	maxB, avail, sched, res := disk.StorageMaximum, w.avail[d], w.sched[d], disk.StorageReserved
	if maxB <= 0 || avail <= 0 || !(avail-v.ActualSize > maxB*s.StorageMinimalAvailablePercentage/100) {
		return "minimal available"
	}
	if !(v.Size+sched <= (maxB-res)*s.StorageOverProvisioningPercentage/100) {
		return "over-provisioning"
	}
	if req.pressure {
		t := s.ReplicaAutoBalanceDiskPressurePercentage
		if !((v.ActualSize+sched+res)*100/maxB < t) || max(avail-v.ActualSize-res, 0)*100/maxB < 100-t {
			return "pressure"
		}
	}
	if !vc.diskSoft && vc.diskU(d) > 0 {
		return "hard disk anti-affinity"
	}
	if nu := vc.nodeU(disk.node); !vc.nodeSoft && vc.zoneSoft && nu.n > nu.evicting {
		return "hard node anti-affinity"
	}
	if zu := vc.zoneU(disk.node); !vc.zoneSoft && zu.n > zu.evicting {
		return "hard zone anti-affinity"
	}
	return ""
}

// TestPropertyRandomClusters plans placement and balancing on 1,000 random
// clusters: every decision obeys the hard rules and capacity predicates and
// equals the plain reference search; plans do not depend on object order
// or on the run; --until-stable ends and no replica returns to a disk it
// left.
func TestPropertyRandomClusters(t *testing.T) {
	const clusters = 1000
	var placed, refused, moved, passesMax, held int
	for seed := range uint64(clusters) {
		c := randomCluster(seed)
		if err := c.Index(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var failures []string
		check := func(vc *volCtx, req *request, got int) {
			if want := refChoose(vc, req); got != want {
				failures = append(failures, fmt.Sprintf("volume %s: choose %d, reference %d", vc.v.Name, got, want))
			}
			if got >= 0 {
				if why := hardRuleViolation(vc, req, got); why != "" {
					failures = append(failures, fmt.Sprintf("volume %s: disk %d breaks %s", vc.v.Name, got, why))
				}
			}
		}
		plan, err := Place(c, &PlaceOptions{Now: propNow, checkChoice: check})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		placed += len(plan.Placements)
		refused += len(plan.Unschedulable)
		again, _ := Place(c, &PlaceOptions{Now: propNow})
		if !reflect.DeepEqual(plan, again) {
			t.Fatalf("seed %d: two runs differ", seed)
		}
		sc := shuffled(c, seed)
		if err := sc.Index(); err != nil {
			t.Fatalf("seed %d: shuffled: %v", seed, err)
		}
		other, _ := Place(sc, &PlaceOptions{Now: propNow})
		if !reflect.DeepEqual(plan, other) {
			t.Fatalf("seed %d: plan depends on object order:\n%s\nvs\n%s", seed, plan.Text(), other.Text())
		}

		passes, err := RebalanceUntilStable(c, &RebalanceOptions{Now: propNow, MaxPasses: 500, checkChoice: check})
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, MovesText(passes))
		}
		passesMax = max(passesMax, len(passes))
		left := map[string][]Location{}
		for _, pass := range passes {
			seen := map[string]bool{}
			for _, m := range pass {
				moved++
				if seen[m.Volume] {
					t.Fatalf("seed %d: volume %s moved twice in one pass", seed, m.Volume)
				}
				seen[m.Volume] = true
				if slices.Contains(left[m.Replica], m.To) {
					t.Fatalf("seed %d: replica %s returns to %v:\n%s", seed, m.Replica, m.To, MovesText(passes))
				}
				left[m.Replica] = append(left[m.Replica], m.From)
				if m.Reason == MoveDiskPressure && m.From.Node != m.To.Node {
					t.Fatalf("seed %d: pressure move leaves its node: %+v", seed, m)
				}
				if m.Reason == MoveDiskPressure && c.Volumes[c.volByName[m.Volume]].ActualSize == 0 {
					t.Fatalf("seed %d: pressure move frees nothing: %+v", seed, m)
				}
			}
		}
		// Every disk the last pass reports as held is under pressure
		// there, on a schedulable node, and gave a reason.
		rp, err := PlanRebalance(c, &RebalanceOptions{Now: propNow, MaxPasses: 500, UntilStable: true})
		if err != nil || !reflect.DeepEqual(rp.Passes, passes) {
			t.Fatalf("seed %d: PlanRebalance differs from RebalanceUntilStable: %v", seed, err)
		}
		if len(rp.Held) > 0 {
			w := newWorld(c, propNow)
			for _, p := range passes {
				for _, m := range p {
					r := slices.IndexFunc(c.Replicas, func(r *Replica) bool { return r.Name == m.Replica })
					n := c.nodeByName[m.To.Node]
					d := slices.IndexFunc(c.Nodes[n].Disks, func(d *Disk) bool { return d.Name == m.To.Disk })
					w.move(r, c.Nodes[n].Disks[d].idx)
				}
			}
			for _, h := range rp.Held {
				n := c.Nodes[c.nodeByName[h.Node]]
				d := slices.IndexFunc(n.Disks, func(d *Disk) bool { return d.Name == h.Disk })
				if w.nodeReason[n.idx] != "" || !w.underPressure(n.Disks[d].idx) || h.Reason == "" {
					t.Fatalf("seed %d: held disk %+v is not a pressured disk of a schedulable node", seed, h)
				}
				held++
			}
		}
		sp, _ := RebalanceUntilStable(sc, &RebalanceOptions{Now: propNow, MaxPasses: 500})
		if !reflect.DeepEqual(passes, sp) {
			t.Fatalf("seed %d: rebalancing depends on object order", seed)
		}
		if len(failures) > 0 {
			t.Fatalf("seed %d: %d bad decisions, first: %s", seed, len(failures), failures[0])
		}
	}
	t.Logf("%d clusters: %d placements, %d unschedulable volumes, %d moves, at most %d passes, %d held disks", clusters, placed, refused, moved, passesMax, held)
	if placed == 0 || refused == 0 || moved == 0 || held == 0 {
		t.Fatalf("the generator does not exercise every outcome")
	}
}
