package longhorn

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// PlaceOptions selects what [Place] plans.
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
}

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
	type kv struct {
		k string
		v int
	}
	var list []kv
	for k, v := range u.Reasons {
		list = append(list, kv{k, v})
	}
	slices.SortFunc(list, func(a, b kv) int {
		if a.v != b.v {
			return b.v - a.v
		}
		return cmpString(a.k, b.k)
	})
	parts := make([]string, len(list))
	for i, e := range list {
		parts[i] = fmt.Sprintf("%d %s", e.v, e.k)
	}
	return fmt.Sprintf("0/%d nodes available: %s", u.Nodes, strings.Join(parts, ", "))
}

// PlacePlan is the result of [Place].
type PlacePlan struct {
	Placements    []Placement     `json:"placements"`
	Unschedulable []Unschedulable `json:"unschedulable"`
}

// Place chooses a node and disk for every missing replica of every volume
// (or of opts.Volume), following the filter order of the package
// documentation. Volumes are planned in name order and replicas placed
// earlier in the run count toward their disks' scheduled bytes. Place does
// not modify c; it is deterministic: the same state gives the same plan.
func Place(c *Cluster, opts PlaceOptions) (*PlacePlan, error) {
	if !c.indexed {
		if err := c.Index(); err != nil {
			return nil, err
		}
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
	n, pins := w.missing(vi)
	if n == 0 {
		return
	}
	v := w.c.Volumes[vi]
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
			Volume:   v.Name,
			Node:     w.c.Nodes[disk.node].Name,
			Disk:     disk.Name,
			DiskPath: disk.Path,
		})
		w.take(d, v.Size, 0)
		vc.add(d, false)
	}
}
