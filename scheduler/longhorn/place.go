package longhorn

import (
	"fmt"
	"strings"
	"time"
)

// PlaceOptions selects what [Place] plans. A nil *PlaceOptions, like the
// zero value, plans every volume with every replenishment wait expired.
type PlaceOptions struct {
	// Volume limits the plan to one volume; "" plans every volume.
	Volume string
	// Now is the time the replenishment wait of degraded volumes is measured
	// against. The zero value treats every wait as expired.
	Now time.Time

	checkChoice func(*volCtx, *request, int) // test hook
}

// Placement is one new replica: the node and the disk (by its name in the
// node's spec.disks) it goes to.
type Placement struct {
	Volume   string `json:"volume"`
	Node     string `json:"node"`
	Disk     string `json:"disk"`
	DiskPath string `json:"disk_path"`
	// Exception says why hard anti-affinity allowed the node when the
	// placement relied on its exception: the zone (or node) holds only
	// replicas of the volume that are being evicted. "" otherwise.
	Exception string `json:"exception,omitempty"`
}

// Waiting is a failed replica that still counts as one of its volume's
// replicas: it may be reused (rebuilt in place) until the replenishment
// wait ends, so no new replica is placed for it before then.
type Waiting struct {
	Volume  string    `json:"volume"`
	Replica string    `json:"replica"`
	Node    string    `json:"node"`
	Disk    string    `json:"disk"`
	Until   time.Time `json:"until"` // lastDegradedAt + replica-replenishment-wait-interval
}

// Validate reports options that cannot be used. Every PlaceOptions can:
// it exists for the package's options convention.
func (o *PlaceOptions) Validate() error { return nil }

// Unschedulable is a volume whose missing replicas could not all be placed,
// with the reasons counted per node or disk.
type Unschedulable struct {
	Volume  string         `json:"volume"`
	Missing int            `json:"missing"`
	Reasons map[string]int `json:"reasons"`
	// Nodes is the number of nodes considered, for [Unschedulable.Summary].
	Nodes int `json:"-"`
}

// Summary renders the reasons the way kube-scheduler does:
// "0/5 nodes available: 3 hard disk anti-affinity, 2 insufficient storage".
// Reasons are ordered by count, then name.
func (u Unschedulable) Summary() string {
	if len(u.Reasons) == 0 {
		return fmt.Sprintf("0/%d nodes available: the cluster has no Longhorn nodes", u.Nodes)
	}
	return fmt.Sprintf("0/%d nodes available: %s", u.Nodes, reasonList(u.Reasons))
}

// PlacePlan is the result of [Place].
type PlacePlan struct {
	Placements    []Placement     `json:"placements"`
	Unschedulable []Unschedulable `json:"unschedulable"`
	// Waiting lists the failed replicas planning waits for (omitted when
	// there are none).
	Waiting []Waiting `json:"waiting,omitempty"`
}

// Place chooses a node and disk for every missing replica of every volume
// (or of opts.Volume), following the filter order of the package
// documentation. Volumes are planned in name order and replicas placed
// earlier in the run count toward their disks' scheduled bytes. Place does
// not modify c; it is deterministic: the same state gives the same plan.
// A nil opts means the defaults.
func Place(c *Cluster, opts *PlaceOptions) (*PlacePlan, error) {
	opts, err := prepare(c, opts)
	if err != nil {
		return nil, err
	}
	plan := &PlacePlan{Placements: []Placement{}, Unschedulable: []Unschedulable{}}
	vols := make([]int, 0, len(c.Volumes))
	if opts.Volume != "" {
		vi, ok := c.volByName[opts.Volume]
		if !ok {
			return nil, fmt.Errorf("volume %q: %w", opts.Volume, ErrNoVolume)
		}
		vols = append(vols, vi)
	} else {
		for vi := range c.Volumes {
			vols = append(vols, vi)
		}
	}
	w := newWorld(c, opts.Now)
	w.checkChoice = opts.checkChoice
	for _, vi := range vols {
		w.placeVolume(vi, plan)
	}
	return plan, nil
}

// missing returns how many replicas volume vi lacks and the hard node
// affinities of its unscheduled replica objects (by name) that fill them.
func (w *world) missing(vi int) (int, []string) {
	v := w.c.Volumes[vi]
	if v.Deleting {
		return 0, nil
	}
	present := 0
	var pins []string
	for _, r := range w.c.volReps[vi] {
		rep := w.c.Replicas[r]
		switch {
		case w.repNode[r] < 0:
			if !rep.Deleting && rep.FailedAt == "" {
				pins = append(pins, rep.HardNodeAffinity)
			}
		case w.counts(r) && !rep.EvictionRequested:
			present++
		}
	}
	n := v.NumberOfReplicas - present
	if n <= 0 {
		return 0, nil
	}
	if len(pins) > n {
		pins = pins[:n]
	}
	return n, pins
}

func (w *world) placeVolume(vi int, plan *PlacePlan) {
	v := w.c.Volumes[vi]
	if !v.Deleting {
		for _, r := range w.c.volReps[vi] {
			rep := w.c.Replicas[r]
			if rep.FailedAt != "" && !rep.EvictionRequested && w.counts(r) {
				disk := w.c.disks[w.repDisk[r]]
				plan.Waiting = append(plan.Waiting, Waiting{
					Volume: v.Name, Replica: rep.Name,
					Node: w.c.Nodes[disk.node].Name, Disk: disk.Name,
					Until: v.LastDegradedAt.Add(w.c.Settings.ReplicaReplenishmentWaitInterval),
				})
			}
		}
	}
	n, pins := w.missing(vi)
	if n == 0 {
		return
	}
	vc := w.volume(vi, -1)
	for k := range n {
		req := newRequest()
		if k < len(pins) && pins[k] != "" {
			if ni, ok := w.c.nodeByName[pins[k]]; ok {
				req.pin = ni
			} else {
				req.pinMissing = true
			}
		}
		d := vc.choose(&req)
		if d < 0 {
			plan.Unschedulable = append(plan.Unschedulable, Unschedulable{
				Volume:  v.Name,
				Missing: n - k,
				Reasons: vc.reasons(&req),
				Nodes:   len(w.c.Nodes),
			})
			return
		}
		disk := w.c.disks[d]
		plan.Placements = append(plan.Placements, Placement{
			Volume:    v.Name,
			Node:      w.c.Nodes[disk.node].Name,
			Disk:      disk.Name,
			DiskPath:  disk.Path,
			Exception: vc.exception(req.tier, disk.node),
		})
		w.take(d, v.Size, 0)
		vc.add(d, false)
	}
}

// exception explains a choice from an exception tier of [volCtx.tiers]:
// with hard zone anti-affinity the second tier (the node's zone holds only
// evicting replicas), with soft zone but hard node anti-affinity the third
// (the node holds only evicting replicas). It returns "" for other tiers.
func (vc *volCtx) exception(tier, n int) string {
	w := vc.w
	var where string
	var in func(r int) bool
	switch {
	case !vc.zoneSoft && tier == 1:
		zone := w.c.nodeZoneIdx[n]
		where = fmt.Sprintf("zone %q", w.c.Nodes[n].Zone)
		in = func(r int) bool { return w.c.nodeZoneIdx[w.repNode[r]] == zone }
	case vc.zoneSoft && !vc.nodeSoft && tier == 2:
		where = "node " + w.c.Nodes[n].Name
		in = func(r int) bool { return w.repNode[r] == n }
	default:
		return ""
	}
	var names []string
	for _, r := range w.c.volReps[vc.vi] {
		if w.counts(r) && w.c.Replicas[r].EvictionRequested && in(r) {
			names = append(names, w.c.Replicas[r].Name)
		}
	}
	rule := "zone"
	if vc.zoneSoft {
		rule = "node"
	}
	return fmt.Sprintf("%s holds only replicas being evicted (%s), which hard %s anti-affinity does not count", where, strings.Join(names, ", "), rule)
}
