package longhorn

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// buildCluster reads the compact cluster description used by the
// data-driven tests:
//
//	setting NAME=VALUE
//	node NAME [zone=Z] [tags=a,b] [notready] [unschedulable] [noscheduling]
//	     [evicting] [deleting] [alloc=CPU] [em=M] [rm=M] [im=M]
//	disk NODE/NAME max=N [avail=N] [reserved=N] [scheduled=N] [tags=a,b]
//	     [type=block] [noscheduling] [evicting] [notschedulable] [nostatus]
//	volume NAME size=N [actual=N] [replicas=N] [node-anti=..] [zone-anti=..]
//	     [disk-anti=..] [balance=..] [nodesel=a,b] [disksel=a,b] [engine=v2]
//	     [robustness=healthy] [degraded-at=RFC3339]
//	replica NAME VOLUME [NODE/DISK] [failed] [retries=N] [evicting]
//	     [affinity=NODE] [deleting] [state=S]
//
// Sizes take K/M/G/T suffixes (powers of 1024). A disk's avail defaults to
// max and its scheduled to the sizes of the replicas on it.
func buildCluster(input string) (_ *Cluster, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = r.(error)
		}
	}()
	c := &Cluster{Settings: DefaultSettings()}
	nodes := map[string]*Node{}
	vols := map[string]*Volume{}
	type diskKey struct{ node, disk string }
	disks := map[diskKey]*Disk{}
	explicitSched := map[*Disk]bool{}
	for ln, line := range strings.Split(input, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		fail := func(format string, a ...any) error {
			return fmt.Errorf("line %d: %s", ln+1, fmt.Sprintf(format, a...))
		}
		kv := map[string]string{}
		var pos []string
		for _, a := range f[1:] {
			if k, v, ok := strings.Cut(a, "="); ok {
				kv[k] = v
			} else {
				pos = append(pos, a)
			}
		}
		flag := func(name string) bool {
			for _, p := range pos {
				if p == name {
					return true
				}
			}
			return false
		}
		size := func(k string, def int64) int64 {
			v, ok := kv[k]
			if !ok {
				return def
			}
			n, err := parseSize(v)
			if err != nil {
				panic(fail("%s: %v", k, err))
			}
			return n
		}
		list := func(k string) []string {
			if v, ok := kv[k]; ok && v != "" {
				return strings.Split(v, ",")
			}
			return nil
		}
		switch f[0] {
		case "setting":
			k, v, _ := strings.Cut(f[1], "=")
			if err := c.Settings.Set(k, v); err != nil {
				return nil, err
			}
		case "node":
			n := &Node{
				Name: f[1], Zone: kv["zone"], Tags: list("tags"),
				Ready: !flag("notready"), Schedulable: !flag("unschedulable"),
				AllowScheduling: !flag("noscheduling"), EvictionRequested: flag("evicting"), Deleting: flag("deleting"),
				EngineManagerCPURequest: size("em", 0), ReplicaManagerCPURequest: size("rm", 0), InstanceManagerCPURequest: size("im", 0),
			}
			if a, ok := kv["alloc"]; ok {
				m, err := parseMilliCPU(a)
				if err != nil {
					return nil, fail("alloc: %v", err)
				}
				n.AllocatableMilliCPU, n.HasAllocatable = m, true
			}
			nodes[n.Name] = n
			c.Nodes = append(c.Nodes, n)
		case "disk":
			nn, dn, _ := strings.Cut(f[1], "/")
			n := nodes[nn]
			if n == nil {
				return nil, fail("no node %q", nn)
			}
			maxB := size("max", 0)
			d := &Disk{
				Name: dn, UUID: dn, Path: "/mnt/" + dn, Type: "filesystem", Tags: list("tags"),
				AllowScheduling: !flag("noscheduling"), EvictionRequested: flag("evicting"),
				HasStatus: !flag("nostatus"), Schedulable: !flag("notschedulable"),
				StorageMaximum: maxB, StorageAvailable: size("avail", maxB), StorageReserved: size("reserved", 0),
				StorageScheduled: size("scheduled", 0),
			}
			if t, ok := kv["type"]; ok {
				d.Type = t
			}
			_, explicitSched[d] = kv["scheduled"]
			n.Disks = append(n.Disks, d)
			disks[diskKey{nn, dn}] = d
		case "volume":
			v := &Volume{
				Name: f[1], Size: size("size", 0), ActualSize: size("actual", 0), NumberOfReplicas: 3,
				ReplicaSoftAntiAffinity: kv["node-anti"], ReplicaZoneSoftAntiAffinity: kv["zone-anti"],
				ReplicaDiskSoftAntiAffinity: kv["disk-anti"], ReplicaAutoBalance: kv["balance"],
				NodeSelector: list("nodesel"), DiskSelector: list("disksel"), DataEngine: kv["engine"],
				Robustness: "healthy",
			}
			if r, ok := kv["replicas"]; ok {
				v.NumberOfReplicas, _ = strconv.Atoi(r)
			}
			if r, ok := kv["robustness"]; ok {
				v.Robustness = r
			}
			if t, ok := kv["degraded-at"]; ok {
				tm, err := time.Parse(time.RFC3339, t)
				if err != nil {
					return nil, fail("degraded-at: %v", err)
				}
				v.LastDegradedAt = tm
			}
			vols[v.Name] = v
			c.Volumes = append(c.Volumes, v)
		case "replica":
			r := &Replica{Name: f[1], VolumeName: f[2], HardNodeAffinity: kv["affinity"], EvictionRequested: flag("evicting"), Deleting: flag("deleting"), CurrentState: kv["state"]}
			if flag("failed") {
				r.FailedAt = "2026-01-01T00:00:00Z"
			}
			if n, ok := kv["retries"]; ok {
				r.RebuildRetryCount, _ = strconv.Atoi(n)
			}
			for _, p := range pos[1:] {
				if nn, dn, ok := strings.Cut(p, "/"); ok {
					r.NodeID, r.DiskID = nn, dn
					if d := disks[diskKey{nn, dn}]; d != nil && !explicitSched[d] && !r.Deleting {
						if v := vols[r.VolumeName]; v != nil {
							d.StorageScheduled += v.Size
						}
					}
				}
			}
			c.Replicas = append(c.Replicas, r)
		default:
			return nil, fail("unknown directive %q", f[0])
		}
	}
	if err := c.Index(); err != nil {
		return nil, err
	}
	return c, nil
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult = 1 << 10
	case strings.HasSuffix(s, "M"):
		mult = 1 << 20
	case strings.HasSuffix(s, "G"):
		mult = 1 << 30
	case strings.HasSuffix(s, "T"):
		mult = 1 << 40
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mult, err
}

// describeDisks renders each disk's state for the "disks" command.
func describeDisks(w *world) string {
	var b strings.Builder
	for _, n := range w.c.Nodes {
		for _, d := range n.Disks {
			fmt.Fprintf(&b, "%s/%s: avail=%d scheduled=%d usable=%d pressured=%v\n",
				n.Name, d.Name, w.avail[d.idx], w.sched[d.idx], w.usable(d.idx), w.underPressure(d.idx))
		}
	}
	return b.String()
}

func sortedReasons(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

func mustCluster(t testing.TB, input string) *Cluster {
	t.Helper()
	c, err := buildCluster(input)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
