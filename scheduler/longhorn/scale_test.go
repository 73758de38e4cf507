package longhorn

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// scaleCluster builds a large seeded cluster the way an operator's cluster
// drifts: nodes in three zones with two disks each, volumes of 3 (some 2)
// replicas spread at random (so many volumes have two replicas in a zone),
// some volumes with node selectors, disks filled unevenly so that a few are
// under disk pressure, best-effort balancing on. Every volume has a
// non-zero actual size. With nodes=2000 and volumes=7000 it is the issue's
// 2,000-node / 20,000-replica state.
func scaleCluster(seed uint64, nodes, volumes int) *Cluster {
	r := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	s := DefaultSettings()
	s.ReplicaAutoBalance = AutoBalanceBestEffort
	s.ReplicaAutoBalanceDiskPressurePercentage = 80
	s.StorageOverProvisioningPercentage = 200
	s.StorageMinimalAvailablePercentage = 10
	c := &Cluster{Settings: s}
	const gib = int64(1) << 30
	for i := range nodes {
		n := &Node{
			Name: fmt.Sprintf("node-%05d", i), Zone: fmt.Sprintf("zone-%c", 'a'+i%3),
			Ready: true, Schedulable: true, AllowScheduling: true,
		}
		switch {
		case r.IntN(100) == 0:
			n.AllowScheduling = false
		case r.IntN(10) == 0:
			n.Tags = []string{"fast"}
		}
		for j := range 2 {
			maxB := int64(300+r.IntN(700)) * gib
			n.Disks = append(n.Disks, &Disk{
				Name: fmt.Sprintf("disk-%d", j), UUID: fmt.Sprintf("uuid-%05d-%d", i, j), Path: fmt.Sprintf("/var/lib/longhorn-%d", j),
				Type: "filesystem", AllowScheduling: true, HasStatus: true, Schedulable: true,
				StorageMaximum: maxB, StorageAvailable: maxB - int64(r.IntN(20))*gib,
				StorageReserved: maxB / 20,
			})
		}
		c.Nodes = append(c.Nodes, n)
	}
	hot := max(nodes/100, 1)
	for i := range volumes {
		size := int64(5+r.IntN(200)) * gib
		v := &Volume{
			Name: fmt.Sprintf("pvc-%06d", i), Size: size, ActualSize: 1 + r.Int64N(size),
			NumberOfReplicas: 3, Robustness: "healthy",
		}
		if i%7 == 0 {
			v.NumberOfReplicas = 2
		}
		if r.IntN(40) == 0 {
			v.NodeSelector = []string{"fast"}
		}
		c.Volumes = append(c.Volumes, v)
		spread := r.IntN(100) < 85 // one replica per zone, as the scheduler left it
		z0 := r.IntN(3)
		for k := range v.NumberOfReplicas {
			var n *Node
			crowded := r.IntN(50) == 0
			switch {
			case crowded:
				n = c.Nodes[3*r.IntN(hot)] // a few crowded first disks
			case spread:
				n = c.Nodes[3*r.IntN(len(c.Nodes)/3)+(z0+k)%3]
			default:
				n = c.Nodes[r.IntN(len(c.Nodes))]
			}
			d := n.Disks[0]
			if !crowded && r.IntN(2) == 0 {
				d = n.Disks[1]
			}
			c.Replicas = append(c.Replicas, &Replica{
				Name: fmt.Sprintf("%s-r-%d", v.Name, k), VolumeName: v.Name,
				NodeID: n.Name, DiskID: d.UUID, CurrentState: "running",
			})
			d.StorageScheduled += v.Size
			d.StorageAvailable = max(d.StorageAvailable-v.ActualSize, 0)
		}
	}
	return c
}

// clusterJSON renders c as `kubectl get -o json` would list it (settings,
// Longhorn nodes, volumes, replicas), for the CLI figures of docs/benchmarks.md.
func clusterJSON(c *Cluster) []byte {
	type obj = map[string]any
	cond := func(ok bool) []obj {
		s := "False"
		if ok {
			s = "True"
		}
		return []obj{{"type": "Schedulable", "status": s}}
	}
	var items []obj
	lh := func(kind, name string, o obj) {
		o["apiVersion"], o["kind"], o["metadata"] = "longhorn.io/v1beta2", kind, obj{"name": name}
		items = append(items, o)
	}
	s := c.Settings
	for name, v := range map[string]string{
		SettingReplicaAutoBalance:                s.ReplicaAutoBalance,
		SettingReplicaAutoBalanceDiskPressure:    fmt.Sprint(s.ReplicaAutoBalanceDiskPressurePercentage),
		SettingStorageOverProvisioningPercentage: fmt.Sprint(s.StorageOverProvisioningPercentage),
		SettingStorageMinimalAvailablePercentage: fmt.Sprint(s.StorageMinimalAvailablePercentage),
	} {
		lh("Setting", name, obj{"value": v})
	}
	for _, n := range c.Nodes {
		spec, status := obj{}, obj{}
		for _, d := range n.Disks {
			spec[d.Name] = obj{"path": d.Path, "diskType": d.Type, "allowScheduling": d.AllowScheduling, "storageReserved": d.StorageReserved, "tags": d.Tags}
			status[d.Name] = obj{"diskUUID": d.UUID, "storageMaximum": d.StorageMaximum, "storageAvailable": d.StorageAvailable,
				"storageScheduled": d.StorageScheduled, "conditions": cond(d.Schedulable)}
		}
		lh("Node", n.Name, obj{
			"spec": obj{"allowScheduling": n.AllowScheduling, "tags": n.Tags, "disks": spec},
			"status": obj{"zone": n.Zone, "diskStatus": status, "conditions": []obj{
				{"type": "Ready", "status": map[bool]string{true: "True", false: "False"}[n.Ready]},
				{"type": "Schedulable", "status": map[bool]string{true: "True", false: "False"}[n.Schedulable]}}},
		})
	}
	for _, v := range c.Volumes {
		lh("Volume", v.Name, obj{
			"spec":   obj{"size": fmt.Sprint(v.Size), "numberOfReplicas": v.NumberOfReplicas, "nodeSelector": v.NodeSelector},
			"status": obj{"actualSize": v.ActualSize, "robustness": v.Robustness},
		})
	}
	for _, r := range c.Replicas {
		lh("Replica", r.Name, obj{
			"spec":   obj{"volumeName": r.VolumeName, "nodeID": r.NodeID, "diskID": r.DiskID},
			"status": obj{"currentState": r.CurrentState},
		})
	}
	b, err := json.Marshal(obj{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		panic(err)
	}
	return b
}

// TestScaleStateJSON reads the generated state back from its JSON and
// plans the same moves as from the generated Cluster. With
// SPARSESYNC_SCALE_STATE=FILE it writes the full-size state there, for
// timing the CLI (docs/benchmarks.md).
func TestScaleStateJSON(t *testing.T) {
	c := scaleCluster(1, 300, 1000)
	if out := os.Getenv("SPARSESYNC_SCALE_STATE"); out != "" {
		c = scaleCluster(1, 2000, 7000)
		if err := os.WriteFile(out, clusterJSON(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := clusterJSON(c)
	if err := c.Index(); err != nil {
		t.Fatal(err)
	}
	rc, err := ReadState("scale.json", data)
	if err != nil {
		t.Fatal(err)
	}
	want, err := RebalanceUntilStable(c, &RebalanceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := RebalanceUntilStable(rc, &RebalanceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if MovesText(got) != MovesText(want) || len(want) == 0 {
		t.Fatalf("plans from JSON and from the generator differ (%d and %d passes)", len(got), len(want))
	}
}
