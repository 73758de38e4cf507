package longhorn

import (
	"fmt"
	"slices"
	"strings"
)

// Reasons a disk under pressure gives up no replica in a pass
// ([HeldDisk.Reason]).
const (
	HeldNoReplica     = "no replica of a healthy volume on the disk"
	HeldVolumeMoved   = "the replica's volume already moved in this pass"
	HeldNotBestEffort = "the replica's volume is not best-effort balanced"
	HeldNotBalanced   = "the replica's volume is not balanced now (not healthy, not exactly its replica count running, or a replica is evicting)"
	HeldFreesNothing  = "moving the replica would not lower the disk's used share (its volume's actual size is 0)"
	HeldNoTarget      = "no other disk of the node can take the replica"
)

// HeldDisk is a disk under pressure that gave up no replica: the replica
// that was its candidate (the first by name) and why it stayed. When no
// disk of the node could take the replica, Reasons counts the refusals per
// disk of the node, as [Unschedulable.Reasons] does for placement.
type HeldDisk struct {
	Node    string         `json:"node"`
	Disk    string         `json:"disk"`
	UsedPct int64          `json:"used_percent"` // 100 − floor(unused × 100 / max), unused = max(0, available − reserved); pressured when above the threshold
	Volume  string         `json:"volume,omitempty"`
	Replica string         `json:"replica,omitempty"`
	Reason  string         `json:"reason"`
	Reasons map[string]int `json:"reasons,omitempty"`
	// Disks is the number of disks on the node, for [HeldDisk.Summary].
	Disks int `json:"-"`
}

// Summary renders the refusals like [Unschedulable.Summary] but per disk of
// the node: "0/2 disks available: 1 disk already holds the replica, 1
// target would be under disk pressure". It is "" when Reasons is empty.
func (h HeldDisk) Summary() string {
	if len(h.Reasons) == 0 {
		return ""
	}
	return fmt.Sprintf("0/%d disks available: %s", h.Disks, reasonList(h.Reasons))
}

// text renders one line: "held node-1 disk-a (93% used, pressure above
// 80%): replica r of volume v: no other disk ...: 0/2 disks available: ...".
func (h HeldDisk) text(threshold int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "held %s %s (%d%% used, pressure above %d%%): ", h.Node, h.Disk, h.UsedPct, threshold)
	if h.Replica != "" {
		fmt.Fprintf(&b, "replica %s of volume %s: ", h.Replica, h.Volume)
	}
	b.WriteString(h.Reason)
	if s := h.Summary(); s != "" {
		b.WriteString(": " + s)
	}
	return b.String()
}

// reasonList renders counted reasons by count, then name.
func reasonList(reasons map[string]int) string {
	type kv struct {
		k string
		v int
	}
	var list []kv
	for k, v := range reasons {
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
	return strings.Join(parts, ", ")
}

// usedPct is the disk's used share as the pressure test sees it.
func (w *world) usedPct(d int) int64 {
	disk := w.c.disks[d]
	if disk.StorageMaximum <= 0 {
		return 0
	}
	unused := min(max(w.avail[d]-disk.StorageReserved, 0), disk.StorageMaximum)
	return 100 - floorPct(unused, disk.StorageMaximum)
}

// floorPct is floor(a × 100 / b) for 0 ≤ a ≤ b, b > 0, without overflow.
func floorPct(a, b int64) int64 {
	for p := int64(100); p > 0; p-- {
		if !mul(a, 100).less(mul(b, p)) { // a×100 ≥ b×p
			return p
		}
	}
	return 0
}

// relieves reports whether taking a replica of the given actual size off
// disk d lowers its used share, max − available (at least 0) over max: the
// replica must have written bytes, and the disk must not already count as
// empty.
func (w *world) relieves(d int, actual int64) bool {
	maxB := w.c.disks[d].StorageMaximum
	return min(satAdd(w.avail[d], actual), maxB) > min(w.avail[d], maxB)
}

// hold records that pressured disk d gave up no replica this pass; r is the
// candidate replica, -1 when there is none.
func (w *world) hold(d, r int, reason string, reasons map[string]int) {
	disk := w.c.disks[d]
	node := w.c.Nodes[disk.node]
	h := HeldDisk{Node: node.Name, Disk: disk.Name, UsedPct: w.usedPct(d), Reason: reason, Reasons: reasons, Disks: len(node.Disks)}
	if r >= 0 {
		h.Replica = w.c.Replicas[r].Name
		h.Volume = w.c.Replicas[r].VolumeName
	}
	w.held = append(w.held, h)
}
