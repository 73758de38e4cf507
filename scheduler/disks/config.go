package disks

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sparsesync/sparsesync/qos"
)

// DiskConfig is one disk of the node: a name and the directory holding its
// replica directories.
type DiskConfig struct {
	// Name identifies the disk in events and plans.
	Name string `json:"name"`
	// Path is the directory whose subdirectories are replica directories.
	// It must be on a mounted filesystem other than the root filesystem
	// unless AllowRootFS is set (see Config.Validate).
	Path string `json:"path"`
	// ReservedBytes is Longhorn's storageReserved: bytes the scheduler
	// treats as unavailable.
	ReservedBytes int64 `json:"reserved_bytes"`
	// NoScheduling is Longhorn's allowScheduling=false: the disk is never a
	// target (replicas may still move off it).
	NoScheduling bool `json:"no_scheduling"`
	// AllowRootFS accepts a path on the root filesystem (Longhorn's
	// default /var/lib/longhorn is one).
	AllowRootFS bool `json:"allow_root_fs"`
}

// Config configures an [Agent]. The zero value of every field but Disks
// means its documented default.
type Config struct {
	// Node names the node in the model the planner sees; "" means "node".
	Node string `json:"node"`
	// Disks are the node's disks; at least two.
	Disks []DiskConfig `json:"disks"`
	// PressurePercent is Longhorn's replica-auto-balance-disk-pressure-
	// percentage: a disk is under pressure when less than 100 − T percent
	// of it is free (after its reserve). nil means 90; 0 turns the agent
	// off (it then only recovers interrupted moves).
	PressurePercent *int64 `json:"pressure_percent,omitempty"`
	// HardAntiAffinity makes disk anti-affinity hard: a replica never
	// moves to a disk holding another replica of its volume. Soft (the
	// default) prefers the disks holding the fewest.
	HardAntiAffinity bool `json:"hard_anti_affinity"`
	// MinimalAvailablePercent and OverProvisioningPercent are Longhorn's
	// storage-minimal-available-percentage (nil: 25) and
	// storage-over-provisioning-percentage (nil: 100).
	MinimalAvailablePercent *int64 `json:"minimal_available_percent,omitempty"`
	OverProvisioningPercent *int64 `json:"over_provisioning_percent,omitempty"`
	// DryRun plans and reports moves without touching any disk.
	DryRun bool `json:"dry_run"`
	// MaxConcurrentMoves is how many moves of a pass run at once, as
	// Longhorn's concurrent-replica-rebuild-per-node-limit bounds the
	// rebuilds of a node. 0 means 1: one move at a time, the default, so a
	// pass never takes more than one copy's worth of the node's disks.
	MaxConcurrentMoves int `json:"max_concurrent_moves,omitempty"`
	// Budget bounds the bytes per second the moves read and write (package
	// qos; rebuild.Options.Budget). It is one budget for the node:
	// concurrent moves share it. The caller may change its rate while the
	// agent runs. The zero Budget is unlimited.
	Budget qos.Budget `json:"-"`

	// Logger receives debug records; nil discards them.
	Logger *slog.Logger `json:"-"`
	// OnEvent, when set, receives every event, one at a time (never two
	// calls at once). With MaxConcurrentMoves above 1 the calls come from
	// the goroutines of the moves, and the events of concurrent moves
	// interleave; each move's own events stay in order.
	OnEvent func(Event) `json:"-"`
	// Now is the clock of events; nil means time.Now.
	Now func() time.Time `json:"-"`

	// step, when set (tests only), is called at every step of a move with
	// its name; the crash tests block in it to be killed there.
	step func(name string)
	// root, when set (tests only), stands in for "/" as the root
	// filesystem of the mount check.
	root string
}

func (c *Config) setDefaults() {
	if c.Node == "" {
		c.Node = "node"
	}
	if c.PressurePercent == nil {
		v := int64(90)
		c.PressurePercent = &v
	}
	if c.MinimalAvailablePercent == nil {
		v := int64(25)
		c.MinimalAvailablePercent = &v
	}
	if c.OverProvisioningPercent == nil {
		v := int64(100)
		c.OverProvisioningPercent = &v
	}
	if c.MaxConcurrentMoves == 0 {
		c.MaxConcurrentMoves = 1
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate checks the configuration against the machine, reading only:
// every disk has a unique name and an absolute path that is an existing
// directory, no two disks name one directory, and no disk is on the root
// filesystem (unless AllowRootFS): its st_dev is not the root's, and the
// mount holding it (/proc/self/mountinfo: the longest mount point above
// the path, symlinks resolved) is not of the root's filesystem, which
// catches btrfs subvolumes and bind mounts of root directories. Two disks
// may share a filesystem. The check cannot tell that a disk failed to mount
// when its path then lies on another filesystem that is not the root (a
// separate /var, say); a path inside the disk's filesystem (a directory
// made after mounting it) does not exist then, and is refused as missing.
// The error names the disk and the cause and matches ErrConfig.
func (c *Config) Validate() error {
	if len(c.Disks) < 2 {
		return configf("%d disk(s) configured: the agent moves replicas between disks and needs at least two", len(c.Disks))
	}
	if p := c.PressurePercent; p != nil && (*p < 0 || *p > 100) {
		return rangef("pressure percent %d is not in 0..100", *p)
	}
	if p := c.MinimalAvailablePercent; p != nil && (*p < 0 || *p > 100) {
		return rangef("minimal available percent %d is not in 0..100", *p)
	}
	if c.MaxConcurrentMoves < 0 {
		return rangef("max concurrent moves %d is negative", c.MaxConcurrentMoves)
	}
	if p := c.OverProvisioningPercent; p != nil && *p < 0 {
		return rangef("over-provisioning percent %d is negative", *p)
	}
	root := c.root
	if root == "" {
		root = "/"
	}
	rootDev, err := device(root)
	if err != nil {
		return err
	}
	rootMount, err := mountOf(root)
	if err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	names := map[string]bool{}
	infos := make([]os.FileInfo, len(c.Disks))
	for i, d := range c.Disks {
		switch {
		case d.Name == "":
			return configf("disk %d (%s): empty name", i+1, d.Path)
		case strings.ContainsAny(d.Name, "/\x00") || strings.TrimSpace(d.Name) != d.Name:
			return configf("disk %q: name must not contain '/' or surrounding spaces", d.Name)
		case names[d.Name]:
			return configf("disk %q: name used twice", d.Name)
		case d.Path == "":
			return configf("disk %q: empty path", d.Name)
		case !filepath.IsAbs(d.Path):
			return configf("disk %q: %s: path is not absolute", d.Name, d.Path)
		case d.ReservedBytes < 0:
			return configf("disk %q: negative reserved bytes %d", d.Name, d.ReservedBytes)
		}
		names[d.Name] = true
		fi, err := os.Stat(d.Path)
		if err != nil {
			return configf("disk %q: %v", d.Name, err)
		}
		if !fi.IsDir() {
			return configf("disk %q: %s: not a directory", d.Name, d.Path)
		}
		infos[i] = fi
		for j := range i {
			if os.SameFile(infos[j], fi) {
				return configf("disk %q and disk %q: two names for one directory %s", c.Disks[j].Name, d.Name, d.Path)
			}
		}
		if d.AllowRootFS {
			continue
		}
		// On the root filesystem: the same st_dev as the root, or a mount
		// of the root's filesystem (a btrfs subvolume has an st_dev of its
		// own; a bind mount of a root directory keeps the root's).
		dev, err := device(d.Path)
		if err != nil {
			return configf("disk %q: %v", d.Name, err)
		}
		m, err := mountOf(d.Path)
		if err != nil && !errors.Is(err, errors.ErrUnsupported) {
			return configf("disk %q: %v", d.Name, err)
		}
		if dev == rootDev || (m.fsID != "" && m.fsID == rootMount.fsID) {
			where := ""
			if m.point != "" {
				where = fmt.Sprintf(", %s %s mounted at %s", m.fsType, m.source, m.point)
			}
			return configf("disk %q: %s: not a mounted disk (it is on the root filesystem%s; mount the disk there, or allow the root filesystem for it)", d.Name, d.Path, where)
		}
	}
	return nil
}
