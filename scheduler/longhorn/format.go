package longhorn

import (
	"fmt"
	"strings"
	"time"
)

// Text renders the plan one line per placement or unschedulable volume:
//
//	place vol-a -> node-1 disk-a (/var/lib/longhorn)
//	unschedulable vol-b: 2 missing: 0/5 nodes available: 3 hard disk anti-affinity, 2 insufficient storage
//	wait vol-c: failed replica r1 on node-2 disk-a may be reused until the replenishment wait ends at 2026-01-01T00:10:00Z
//
// A placement that relied on an anti-affinity exception says so after a
// colon.
func (p *PlacePlan) Text() string {
	var b strings.Builder
	for _, pl := range p.Placements {
		fmt.Fprintf(&b, "place %s -> %s %s (%s)", pl.Volume, pl.Node, pl.Disk, pl.DiskPath)
		if pl.Exception != "" {
			fmt.Fprintf(&b, ": %s", pl.Exception)
		}
		b.WriteByte('\n')
	}
	for _, u := range p.Unschedulable {
		fmt.Fprintf(&b, "unschedulable %s: %d missing: %s\n", u.Volume, u.Missing, u.Summary())
	}
	if len(p.Placements)+len(p.Unschedulable) == 0 && len(p.Waiting) > 0 {
		b.WriteString("nothing to place\n")
	}
	for _, wt := range p.Waiting {
		fmt.Fprintf(&b, "wait %s: failed replica %s on %s %s may be reused until the replenishment wait ends at %s\n",
			wt.Volume, wt.Replica, wt.Node, wt.Disk, wt.Until.UTC().Format(time.RFC3339))
	}
	if b.Len() == 0 {
		return "nothing to place\n"
	}
	return b.String()
}

// MovesText renders passes of moves, one line per move.
func MovesText(passes [][]Move) string {
	var b strings.Builder
	for i, pass := range passes {
		for _, m := range pass {
			fmt.Fprintf(&b, "pass %d: %s %s: %s %s -> %s %s (%s)\n", i+1, m.Volume, m.Replica,
				m.From.Node, m.From.Disk, m.To.Node, m.To.Disk, m.Reason)
		}
	}
	if b.Len() == 0 {
		return "balanced: nothing to move\n"
	}
	return b.String()
}

// Text renders the passes as [MovesText] does, then one line per disk
// under pressure that kept its replicas:
//
//	held n1 d0 (93% used, pressure above 80%): replica r of volume v: no other disk of the node can take the replica: 0/2 disks available: ...
func (p *RebalancePlan) Text() string {
	if len(p.Held) == 0 {
		return MovesText(p.Passes)
	}
	var b strings.Builder
	if t := MovesText(p.Passes); t != MovesText(nil) {
		b.WriteString(t)
	} else {
		b.WriteString("nothing to move\n")
	}
	for _, h := range p.Held {
		b.WriteString(h.text(p.Threshold) + "\n")
	}
	return b.String()
}

// Text renders the CPU plan: one line per node, then one per error.
func (p *CPUPlan) Text() string {
	var b strings.Builder
	for _, n := range p.Nodes {
		fmt.Fprintf(&b, "%s: allocatable %dm", n.Node, n.AllocatableMilliCPU)
		if n.EngineManagerMilliCPU != nil {
			fmt.Fprintf(&b, ", engine manager %s", milli(*n.EngineManagerMilliCPU))
		}
		if n.ReplicaManagerMilliCPU != nil {
			fmt.Fprintf(&b, ", replica manager %s", milli(*n.ReplicaManagerMilliCPU))
		}
		if n.InstanceManagerMilliCPU != nil {
			fmt.Fprintf(&b, ", instance manager %s", milli(*n.InstanceManagerMilliCPU))
		}
		b.WriteByte('\n')
	}
	for _, e := range p.Errors {
		fmt.Fprintf(&b, "error: %s\n", e)
	}
	return b.String()
}

func milli(v int64) string {
	if v == 0 {
		return "no request"
	}
	return fmt.Sprintf("%dm", v)
}

// ChangesText renders upgrade changes, one line each.
func ChangesText(changes []Change) string {
	var b strings.Builder
	for _, c := range changes {
		fmt.Fprintf(&b, "%s %s: %q -> %q", c.Object, c.Field, c.From, c.To)
		if c.Note != "" {
			fmt.Fprintf(&b, " (%s)", c.Note)
		}
		b.WriteByte('\n')
	}
	if b.Len() == 0 {
		return "nothing to migrate\n"
	}
	return b.String()
}
