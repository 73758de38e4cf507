package disks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/scheduler/longhorn"
)

// Replica is a replica directory found on a disk.
type Replica struct {
	Name   string // the directory's name
	Volume string // see [VolumeOf]
	Disk   string // the disk's name
	Dir    string
	// Size is the volume size; Allocated the bytes every file of the
	// directory occupies (Longhorn's actual size of the replica).
	Size      int64
	Allocated int64
}

// DiskState is a disk as one pass measured it.
type DiskState struct {
	Name           string `json:"name"`
	Path           string `json:"path"`
	MaxBytes       int64  `json:"max_bytes"`       // statfs: size of the filesystem
	AvailableBytes int64  `json:"available_bytes"` // statfs: available to unprivileged writers
	ReservedBytes  int64  `json:"reserved_bytes"`
	ScheduledBytes int64  `json:"scheduled_bytes"` // sum of the sizes of its replicas
	Replicas       int    `json:"replicas"`
	Pressured      bool   `json:"pressured"`
	NoScheduling   bool   `json:"no_scheduling"`
}

// Move is one planned move of a replica between two disks (by name).
type Move struct {
	Replica string `json:"replica"`
	Volume  string `json:"volume"`
	From    string `json:"from"`
	To      string `json:"to"`
	Bytes   int64  `json:"bytes"` // the replica's allocated bytes
}

// VolumeOf returns the volume a replica directory belongs to, from its
// name: Longhorn names replica directories "<volume>-<8 random lowercase
// letters or digits>"; any other name is a volume of its own. Replicas of
// one volume are what disk anti-affinity keeps apart.
func VolumeOf(dirName string) string {
	i := strings.LastIndexByte(dirName, '-')
	if i <= 0 || len(dirName)-i-1 != 8 {
		return dirName
	}
	for _, c := range []byte(dirName[i+1:]) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return dirName
		}
	}
	return dirName[:i]
}

// scan measures every disk and inspects every replica directory on it.
// Directories that are not replicas (lost+found) are ignored; replicas that
// cannot be used (corrupt, half rebuilt, one name on two disks) are
// reported as skip events and left out of the model, their space still
// counted by statfs.
func (a *Agent) scan(ctx context.Context) ([]DiskState, []Replica, error) {
	states := make([]DiskState, len(a.cfg.Disks))
	var reps []Replica
	for i, d := range a.cfg.Disks {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		maxB, avail, err := statfs(d.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("disk %q: %w", d.Name, err)
		}
		states[i] = DiskState{Name: d.Name, Path: d.Path, MaxBytes: maxB, AvailableBytes: avail,
			ReservedBytes: d.ReservedBytes, NoScheduling: d.NoScheduling}
		ents, err := os.ReadDir(d.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("disk %q: %w", d.Name, err)
		}
		for _, e := range ents {
			if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			dir := filepath.Join(d.Path, e.Name())
			info, err := replica.Inspect(dir, nil)
			if errors.Is(err, replica.ErrNotReplica) && !hasVolumeMeta(dir) {
				a.emit(Event{Kind: EventIgnored, Replica: e.Name(), From: d.Name, Reason: notReplicaReason(dir)})
				continue
			}
			r := Replica{Name: e.Name(), Volume: VolumeOf(e.Name()), Disk: d.Name, Dir: dir, Size: info.Size}
			if err == nil {
				r.Allocated, err = dirAllocated(dir)
			}
			if err != nil {
				a.emit(Event{Kind: EventSkip, Replica: r.Name, Volume: r.Volume, From: d.Name, Reason: "not a usable replica: " + err.Error()})
				continue
			}
			states[i].ScheduledBytes += info.Size
			states[i].Replicas++
			reps = append(reps, r)
		}
	}
	// One name on two disks is a duplicate the agent did not make (its
	// moves never leave one): leave both alone for a human to decide.
	seen := map[string]int{}
	for _, r := range reps {
		seen[r.Name]++
	}
	kept := reps[:0]
	for _, r := range reps {
		if seen[r.Name] > 1 {
			a.emit(Event{Kind: EventSkip, Replica: r.Name, Volume: r.Volume, From: r.Disk,
				Reason: "a directory of this name is on more than one disk; not moving either"})
			continue
		}
		kept = append(kept, r)
	}
	return states, kept, nil
}

// notReplicaReason says why dir, beneath a disk's path, is passed over,
// and points at replica directories one level down (a disk given as its
// mount point, /mnt/d1, holding /mnt/d1/replicas/vol-...).
func notReplicaReason(dir string) string {
	reason := "not a replica directory (no " + replica.VolumeMetaFile + "); replicas must be directly beneath the disk's path"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return reason
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() && hasVolumeMeta(filepath.Join(dir, e.Name())) {
			n++
		}
	}
	if n > 0 {
		reason += fmt.Sprintf("; it holds %d replica director%s: give the disk as NAME=%s", n, map[bool]string{true: "y", false: "ies"}[n == 1], dir)
	}
	return reason
}

func hasVolumeMeta(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, replica.VolumeMetaFile))
	return err == nil
}

// dirAllocated sums the allocated bytes of the regular files in dir.
func dirAllocated(dir string) (int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range ents {
		fi, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if fi.Mode().IsRegular() {
			n += allocated(fi)
		}
	}
	return n, nil
}

// diskUUID is the disk's id in the model (replicas refer to disks by it).
func diskUUID(name string) string { return "disk-" + name }

// cluster builds the one-node model scheduler/longhorn plans on: the node
// ready and schedulable, each disk with its statfs bytes, reserve and
// scheduling switch, each volume healthy with as many replicas as this node
// holds, auto-balance best-effort (the only mode with the pressure move),
// node anti-affinity soft (every replica of the model is on this node by
// construction), disk anti-affinity as configured.
func (a *Agent) cluster(states []DiskState, reps []Replica) *longhorn.Cluster {
	c := &longhorn.Cluster{Settings: longhorn.DefaultSettings()}
	s := &c.Settings
	s.ReplicaAutoBalance = longhorn.AutoBalanceBestEffort
	s.ReplicaAutoBalanceDiskPressurePercentage = *a.cfg.PressurePercent
	s.ReplicaSoftAntiAffinity = true
	s.ReplicaDiskSoftAntiAffinity = !a.cfg.HardAntiAffinity
	s.StorageMinimalAvailablePercentage = *a.cfg.MinimalAvailablePercent
	s.StorageOverProvisioningPercentage = *a.cfg.OverProvisioningPercent
	node := &longhorn.Node{Name: a.cfg.Node, Ready: true, Schedulable: true, AllowScheduling: true}
	for _, st := range states {
		node.Disks = append(node.Disks, &longhorn.Disk{
			Name: st.Name, UUID: diskUUID(st.Name), Path: st.Path, Type: "filesystem",
			AllowScheduling: !st.NoScheduling, HasStatus: true, Schedulable: true,
			StorageReserved: st.ReservedBytes, StorageMaximum: st.MaxBytes,
			StorageAvailable: st.AvailableBytes, StorageScheduled: st.ScheduledBytes,
		})
	}
	c.Nodes = []*longhorn.Node{node}
	vols := map[string]*longhorn.Volume{}
	for _, r := range reps {
		v := vols[r.Volume]
		if v == nil {
			v = &longhorn.Volume{Name: r.Volume, DataEngine: "v1", Robustness: "healthy"}
			vols[r.Volume] = v
			c.Volumes = append(c.Volumes, v)
		}
		v.NumberOfReplicas++
		v.Size = max(v.Size, r.Size)
		v.ActualSize = max(v.ActualSize, r.Allocated)
		c.Replicas = append(c.Replicas, &longhorn.Replica{Name: r.Name, VolumeName: r.Volume,
			NodeID: a.cfg.Node, DiskID: diskUUID(r.Disk), CurrentState: "running"})
	}
	return c
}

// plan measures the disks and returns their state and the moves the
// planner makes: scheduler/longhorn's disk-pressure moves for this node.
func (a *Agent) plan(ctx context.Context) ([]DiskState, []Move, map[string]Replica, []longhorn.HeldDisk, error) {
	states, reps, err := a.scan(ctx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	c := a.cluster(states, reps)
	if err := c.Index(); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("model: %w", err)
	}
	pressure, err := longhorn.DiskPressure(c)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	for i := range states {
		states[i].Pressured = pressure[a.cfg.Node][states[i].Name]
	}
	plan, err := longhorn.PlanRebalance(c, &longhorn.RebalanceOptions{Now: a.cfg.Now()})
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("plan: %w", err)
	}
	var planned []longhorn.Move
	if len(plan.Passes) > 0 {
		planned = plan.Passes[0]
	}
	var held []longhorn.HeldDisk
	for _, h := range plan.Held {
		if h.Node == a.cfg.Node {
			held = append(held, h)
		}
	}
	byName := make(map[string]Replica, len(reps))
	for _, r := range reps {
		byName[r.Name] = r
	}
	var moves []Move
	for _, m := range planned {
		if m.Reason != longhorn.MoveDiskPressure || m.From.Node != a.cfg.Node || m.To.Node != a.cfg.Node {
			continue // unreachable on one node; never acted on
		}
		r := byName[m.Replica]
		moves = append(moves, Move{Replica: m.Replica, Volume: m.Volume, From: m.From.Disk, To: m.To.Disk, Bytes: r.Allocated})
	}
	return states, moves, byName, held, nil
}
