package ganeti

// Cluster is a Ganeti cluster as the text backend describes it. Node and
// instance references are indices into Nodes; -1 means "none".
//
// A Cluster is plain data; readers return a fresh one and planners never
// modify their input.
type Cluster struct {
	Groups    []Group    `json:"groups"`
	Nodes     []Node     `json:"nodes"`
	Instances []Instance `json:"instances"`
	// Tags are the cluster tags (exclusion, location, migration prefixes).
	Tags []string `json:"tags,omitempty"`
	// Policy is the cluster instance policy; its standard spec sizes the
	// squeeze reserve instance.
	Policy IPolicy `json:"policy"`
}

// Group is a node group with its instance policy.
type Group struct {
	Name        string   `json:"name"`
	UUID        string   `json:"uuid"`
	AllocPolicy string   `json:"alloc_policy"` // preferred, last_resort, unallocable
	Tags        []string `json:"tags,omitempty"`
	Networks    []string `json:"networks,omitempty"`
	Policy      IPolicy  `json:"policy"`
}

// Node is a physical node. Memory and disk are in MiB.
type Node struct {
	Name         string   `json:"name"`
	TotalMem     float64  `json:"total_mem"`
	NodeMem      int      `json:"node_mem"` // used by the node OS
	FreeMem      int      `json:"free_mem"`
	TotalDisk    float64  `json:"total_disk"`
	FreeDisk     int      `json:"free_disk"`
	TotalCPU     float64  `json:"total_cpu"`
	Master       bool     `json:"master,omitempty"`
	Offline      bool     `json:"offline,omitempty"`
	Group        int      `json:"group"` // index into Cluster.Groups
	Spindles     int      `json:"spindles"`
	Tags         []string `json:"tags,omitempty"`
	ExclStorage  bool     `json:"excl_storage,omitempty"`
	FreeSpindles int      `json:"free_spindles"`
	OSCPUs       int      `json:"os_cpus"`
	CPUSpeed     float64  `json:"cpu_speed"`
}

// Instance is a virtual machine. Memory and disk are in MiB.
type Instance struct {
	Name        string       `json:"name"`
	Mem         int          `json:"mem"`
	Disk        int          `json:"disk"`
	VCPUs       int          `json:"vcpus"`
	Status      string       `json:"status"` // running, ADMIN_down, ADMIN_offline, ...
	AutoBalance bool         `json:"auto_balance"`
	PNode       int          `json:"pnode"`          // index into Cluster.Nodes
	SNode       int          `json:"snode"`          // -1 if none
	Template    DiskTemplate `json:"disk_template"`  // drbd, plain, ext, ...
	Tags        []string     `json:"tags,omitempty"` //
	SpindleUse  int          `json:"spindle_use"`    //
	Spindles    int          `json:"spindles"`       // -1 if unknown
	Forthcoming bool         `json:"forthcoming,omitempty"`
}

// ISpec is an instance specification (a point of an instance policy).
type ISpec struct {
	MemorySize int `json:"memory_size"`
	CPUCount   int `json:"cpu_count"`
	DiskSize   int `json:"disk_size"`
	DiskCount  int `json:"disk_count"`
	NICCount   int `json:"nic_count"`
	SpindleUse int `json:"spindle_use"`
}

// MinMaxSpec is one allowed range of instance sizes.
type MinMaxSpec struct {
	Min ISpec `json:"min"`
	Max ISpec `json:"max"`
}

// IPolicy is an instance policy.
type IPolicy struct {
	MinMax        []MinMaxSpec   `json:"minmax"`
	Std           ISpec          `json:"std"`
	DiskTemplates []DiskTemplate `json:"disk_templates"`
	VCPURatio     float64        `json:"vcpu_ratio"`
	SpindleRatio  float64        `json:"spindle_ratio"`
}

// DefaultIPolicy returns Ganeti's built-in instance policy, used for the
// cluster and for every group that has no policy line.
func DefaultIPolicy() IPolicy {
	return IPolicy{
		MinMax: []MinMaxSpec{{
			Min: ISpec{MemorySize: 128, CPUCount: 1, DiskSize: 1024, DiskCount: 1, NICCount: 1, SpindleUse: 1},
			Max: ISpec{MemorySize: 32768, CPUCount: 8, DiskSize: 1024 * 1024, DiskCount: 16, NICCount: 8, SpindleUse: 12},
		}},
		Std:           ISpec{MemorySize: 128, CPUCount: 1, DiskSize: 1024, DiskCount: 1, NICCount: 1, SpindleUse: 1},
		DiskTemplates: append([]DiskTemplate(nil), allTemplates...),
		VCPURatio:     4.0,
		SpindleRatio:  32.0,
	}
}

// DiskTemplate is an instance disk template as Ganeti spells it.
type DiskTemplate string

// Disk templates.
const (
	Diskless   DiskTemplate = "diskless"
	File       DiskTemplate = "file"
	SharedFile DiskTemplate = "sharedfile"
	Plain      DiskTemplate = "plain"
	BlockDev   DiskTemplate = "blockdev"
	DRBD       DiskTemplate = "drbd"
	RBD        DiskTemplate = "rbd"
	Ext        DiskTemplate = "ext"
	Gluster    DiskTemplate = "gluster"
)

var allTemplates = []DiskTemplate{Diskless, File, SharedFile, Plain, BlockDev, DRBD, RBD, Ext, Gluster}

func validTemplate(t DiskTemplate) bool {
	for _, x := range allTemplates {
		if x == t {
			return true
		}
	}
	return false
}

// MirrorType is how an instance's disks are replicated.
type MirrorType int

// Mirror types.
const (
	MirrorNone     MirrorType = iota // plain, file, diskless: cannot move
	MirrorInternal                   // drbd: primary and secondary node
	MirrorExternal                   // ext, rbd, sharedfile, blockdev, gluster: any node
)

// Mirror returns the mirror type of a disk template.
func (t DiskTemplate) Mirror() MirrorType {
	switch t {
	case DRBD:
		return MirrorInternal
	case SharedFile, BlockDev, RBD, Ext, Gluster:
		return MirrorExternal
	default:
		return MirrorNone
	}
}

// usesLocalStorage reports whether the template uses the node's disk.
func (t DiskTemplate) usesLocalStorage() bool { return t == DRBD || t == Plain }

// movable reports whether Ganeti can move instances of this template.
func (t DiskTemplate) movable() bool { return t.Mirror() != MirrorNone }

var validStatus = map[string]bool{
	"running": true, "ERROR_up": true, "ERROR_down": true, "ADMIN_down": true,
	"ERROR_nodedown": true, "ERROR_nodeoffline": true, "ADMIN_offline": true,
	"ERROR_wrongnode": true, "USER_down": true,
}

// Tag prefixes Ganeti's htools interpret.
const (
	TagExclusionPrefix       = "htools:iextags:"
	TagStandbyPrefix         = "htools:standby:"
	TagStandbyAuto           = "htools:standby:auto"
	TagMigrationPrefix       = "htools:migration:"
	TagAllowMigrationPrefix  = "htools:allowmigration:"
	TagLocationPrefix        = "htools:nlocation:"
	TagDesiredLocationPrefix = "htools:desiredlocation:"
)
