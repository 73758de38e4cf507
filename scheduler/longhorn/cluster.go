package longhorn

import (
	"slices"
	"time"
)

// Cluster is the part of a Longhorn cluster's state the planners read:
// settings, nodes with their disks, volumes and replicas. It is built by
// [ReadState] or [Loader] (or by hand, then [Cluster.Index]) and is never
// modified by the planners, so one Cluster may be shared by goroutines that
// only read it and run planners on it concurrently.
type Cluster struct {
	Settings Settings
	Nodes    []*Node    // sorted by Name
	Volumes  []*Volume  // sorted by Name
	Replicas []*Replica // sorted by Name

	indexed     bool
	nodeByName  map[string]int
	volByName   map[string]int
	disks       []*Disk // every disk of every node; Disk.idx indexes it
	volReps     [][]int // replica indices of each volume, sorted by name
	repVol      []int   // volume index of each replica
	repNode     []int   // node index of each replica, -1 when unscheduled
	repDisk     []int   // disk index of each replica, -1 when unscheduled
	nodeZoneIdx []int   // zone of each node, interned
}

// Node is a Longhorn node (nodes.longhorn.io) together with the allocatable
// CPU of the Kubernetes node of the same name, when that was given.
type Node struct {
	Name              string // metadata.name
	Deleting          bool   // metadata.deletionTimestamp is set
	Ready             bool   // status.conditions[type=Ready].status == "True"
	Schedulable       bool   // status.conditions[type=Schedulable].status == "True"
	AllowScheduling   bool   // spec.allowScheduling
	EvictionRequested bool   // spec.evictionRequested
	Tags              []string
	Zone              string  // status.zone
	Region            string  // status.region
	Disks             []*Disk // sorted by Name (the key in spec.disks)

	// CPU requests in milli-CPU: spec.engineManagerCPURequest,
	// spec.replicaManagerCPURequest (Longhorn 1.1-1.4) and
	// spec.instanceManagerCPURequest (1.5 and later).
	EngineManagerCPURequest   int64
	ReplicaManagerCPURequest  int64
	InstanceManagerCPURequest int64

	// AllocatableMilliCPU is status.allocatable.cpu of the Kubernetes node
	// of the same name; HasAllocatable says whether one was given.
	AllocatableMilliCPU int64
	HasAllocatable      bool

	idx int
}

// Disk is one entry of a node's spec.disks merged with its status.diskStatus.
type Disk struct {
	Name              string // key in spec.disks and status.diskStatus
	UUID              string // status.diskStatus.diskUUID; replicas' spec.diskID refers to it
	Path              string // spec.disks.path
	Type              string // spec.disks.diskType: "filesystem" (default) or "block"
	AllowScheduling   bool   // spec.disks.allowScheduling
	EvictionRequested bool   // spec.disks.evictionRequested
	Tags              []string
	HasStatus         bool // an entry in status.diskStatus exists
	Schedulable       bool // status.diskStatus.conditions[type=Schedulable].status == "True"

	// Bytes: spec.disks.storageReserved and status.diskStatus.storage*.
	StorageReserved  int64
	StorageMaximum   int64
	StorageAvailable int64
	StorageScheduled int64

	node int // index of the node in Cluster.Nodes
	idx  int // index in Cluster.disks
}

// Volume is a Longhorn volume (volumes.longhorn.io).
type Volume struct {
	Name             string
	Deleting         bool
	Size             int64 // spec.size, bytes
	ActualSize       int64 // status.actualSize, bytes
	NumberOfReplicas int   // spec.numberOfReplicas
	DataEngine       string
	NodeSelector     []string
	DiskSelector     []string

	// Per-volume overrides: "ignored" (use the setting), "enabled" or "disabled".
	ReplicaSoftAntiAffinity     string
	ReplicaZoneSoftAntiAffinity string
	ReplicaDiskSoftAntiAffinity string
	// ReplicaAutoBalance is "ignored" (use the setting), "disabled",
	// "least-effort" or "best-effort".
	ReplicaAutoBalance string

	Robustness     string    // status.robustness: "healthy", "degraded", ...
	LastDegradedAt time.Time // status.lastDegradedAt; zero when not set
}

// Replica is a Longhorn replica (replicas.longhorn.io).
type Replica struct {
	Name              string
	Deleting          bool
	VolumeName        string // spec.volumeName
	NodeID            string // spec.nodeID; empty when not scheduled
	DiskID            string // spec.diskID: the diskUUID of the disk
	FailedAt          string // spec.failedAt; non-empty when failed
	RebuildRetryCount int    // spec.rebuildRetryCount
	EvictionRequested bool   // spec.evictionRequested or status.evictionRequested
	HardNodeAffinity  string // spec.hardNodeAffinity
	CurrentState      string // status.currentState
}

// Longhorn's bounds on a volume's spec.numberOfReplicas.
const (
	MinReplicas = 1
	MaxReplicas = 20
)

// Index checks the cross references of a hand-built Cluster (sorting its
// slices by name) and prepares it for the planners. [ReadState] and
// [Loader.Cluster] call it. It returns an error naming the object and field
// when a volume or replica refers to something that does not exist or a
// value is out of range.
func (c *Cluster) Index() error {
	for _, err := range []error{noNil(c.Nodes, "nodes", "node"), noNil(c.Volumes, "volumes", "volume"), noNil(c.Replicas, "replicas", "replica")} {
		if err != nil {
			return err
		}
	}
	slices.SortFunc(c.Nodes, func(a, b *Node) int { return cmpString(a.Name, b.Name) })
	slices.SortFunc(c.Volumes, func(a, b *Volume) int { return cmpString(a.Name, b.Name) })
	slices.SortFunc(c.Replicas, func(a, b *Replica) int { return cmpString(a.Name, b.Name) })
	if err := c.Settings.Validate(); err != nil {
		return err
	}
	var err error
	if c.nodeByName, err = indexNames(c.Nodes, func(n *Node) string { return n.Name }, "node"); err != nil {
		return err
	}
	c.nodeZoneIdx = make([]int, len(c.Nodes))
	zones := map[string]int{}
	c.disks = c.disks[:0]
	for i, n := range c.Nodes {
		n.idx = i
		z, ok := zones[n.Zone]
		if !ok {
			z = len(zones)
			zones[n.Zone] = z
		}
		c.nodeZoneIdx[i] = z
		slices.SortFunc(n.Disks, func(a, b *Disk) int { return cmpString(a.Name, b.Name) })
		for j, d := range n.Disks {
			if d == nil {
				return errorf("node %q: spec.disks[%d]: nil disk", n.Name, j)
			}
			if j > 0 && n.Disks[j-1].Name == d.Name {
				return errorf("node %q: spec.disks: duplicate disk %q", n.Name, d.Name)
			}
			for _, f := range []struct {
				name string
				v    int64
			}{
				{"spec.disks[" + d.Name + "].storageReserved", d.StorageReserved},
				{"status.diskStatus[" + d.Name + "].storageMaximum", d.StorageMaximum},
				{"status.diskStatus[" + d.Name + "].storageAvailable", d.StorageAvailable},
				{"status.diskStatus[" + d.Name + "].storageScheduled", d.StorageScheduled},
			} {
				if f.v < 0 {
					return errorf("node %q: %s: negative size %d", n.Name, f.name, f.v)
				}
			}
			d.node = i
			d.idx = len(c.disks)
			c.disks = append(c.disks, d)
		}
		if n.AllocatableMilliCPU < 0 {
			return errorf("node %q: status.allocatable.cpu: negative value %dm", n.Name, n.AllocatableMilliCPU)
		}
	}
	if c.volByName, err = indexNames(c.Volumes, func(v *Volume) string { return v.Name }, "volume"); err != nil {
		return err
	}
	for _, v := range c.Volumes {
		switch {
		case v.Size < 0:
			return errorf("volume %q: spec.size: negative size %d", v.Name, v.Size)
		case v.ActualSize < 0:
			return errorf("volume %q: status.actualSize: negative size %d", v.Name, v.ActualSize)
		case v.NumberOfReplicas < MinReplicas || v.NumberOfReplicas > MaxReplicas:
			return errorf("volume %q: spec.numberOfReplicas: %d is not in %d..%d", v.Name, v.NumberOfReplicas, MinReplicas, MaxReplicas)
		}
		for _, f := range []struct{ name, v string }{
			{"spec.replicaSoftAntiAffinity", v.ReplicaSoftAntiAffinity},
			{"spec.replicaZoneSoftAntiAffinity", v.ReplicaZoneSoftAntiAffinity},
			{"spec.replicaDiskSoftAntiAffinity", v.ReplicaDiskSoftAntiAffinity},
		} {
			switch f.v {
			case "", "ignored", "enabled", "disabled":
			default:
				return errorf("volume %q: %s: %q is not ignored, enabled or disabled", v.Name, f.name, f.v)
			}
		}
		switch v.ReplicaAutoBalance {
		case "", "ignored", AutoBalanceDisabled, AutoBalanceLeastEffort, AutoBalanceBestEffort:
		default:
			return errorf("volume %q: spec.replicaAutoBalance: %q is not ignored, disabled, least-effort or best-effort", v.Name, v.ReplicaAutoBalance)
		}
		switch v.DataEngine {
		case "", "v1", "v2":
		default:
			return errorf("volume %q: spec.dataEngine: %q is not v1 or v2", v.Name, v.DataEngine)
		}
	}
	n := len(c.Replicas)
	c.volReps = make([][]int, len(c.Volumes))
	c.repVol = make([]int, n)
	c.repNode = make([]int, n)
	c.repDisk = make([]int, n)
	for i, r := range c.Replicas {
		if i > 0 && c.Replicas[i-1].Name == r.Name {
			return errorf("replica %q: metadata.name: duplicate", r.Name)
		}
		vi, ok := c.volByName[r.VolumeName]
		if !ok {
			return errorf("replica %q: spec.volumeName: no volume %q", r.Name, r.VolumeName)
		}
		if r.RebuildRetryCount < 0 {
			return errorf("replica %q: spec.rebuildRetryCount: negative count %d", r.Name, r.RebuildRetryCount)
		}
		c.repVol[i] = vi
		c.volReps[vi] = append(c.volReps[vi], i)
		c.repNode[i], c.repDisk[i] = -1, -1
		if r.NodeID == "" {
			if r.DiskID != "" {
				return errorf("replica %q: spec.diskID: %q set but spec.nodeID is empty", r.Name, r.DiskID)
			}
			continue
		}
		ni, ok := c.nodeByName[r.NodeID]
		if !ok {
			return errorf("replica %q: spec.nodeID: no node %q", r.Name, r.NodeID)
		}
		c.repNode[i] = ni
		if r.DiskID == "" {
			return errorf("replica %q: spec.diskID: empty but spec.nodeID is %q", r.Name, r.NodeID)
		}
		for _, d := range c.Nodes[ni].Disks {
			if d.UUID == r.DiskID {
				c.repDisk[i] = d.idx
				break
			}
		}
		if c.repDisk[i] < 0 {
			return errorf("replica %q: spec.diskID: no disk with diskUUID %q on node %q", r.Name, r.DiskID, r.NodeID)
		}
	}
	c.indexed = true
	return nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// noNil refuses a nil item ("nodes[3]: nil node", before Index sorts).
func noNil[T any](items []*T, list, kind string) error {
	for i, it := range items {
		if it == nil {
			return errorf("%s[%d]: nil %s", list, i, kind)
		}
	}
	return nil
}

// indexNames maps each item's name to its index, refusing a duplicate name.
func indexNames[T any](items []*T, name func(*T) string, kind string) (map[string]int, error) {
	m := make(map[string]int, len(items))
	for i, it := range items {
		n := name(it)
		if _, dup := m[n]; dup {
			return nil, errorf("%s %q: metadata.name: duplicate", kind, n)
		}
		m[n] = i
	}
	return m, nil
}

// indexOnce indexes c unless it is indexed already: what every planner
// does first.
func (c *Cluster) indexOnce() error {
	if c.indexed {
		return nil
	}
	return c.Index()
}

// prepare is what every planner does first: check its options (nil: the
// zero value, the defaults) and index c unless it is indexed already.
func prepare[T any, P interface {
	*T
	Validate() error
}](c *Cluster, opts P) (P, error) {
	if opts == nil {
		opts = new(T)
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return opts, c.indexOnce()
}
