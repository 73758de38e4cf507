package longhorn_test

import (
	"fmt"

	"github.com/sparsesync/sparsesync/scheduler/longhorn"
)

// A node with two disks; a volume asking for two replicas with disk
// anti-affinity made hard for it, and node anti-affinity soft.
const exampleState = `{"apiVersion": "v1", "kind": "List", "items": [
 {"apiVersion": "longhorn.io/v1beta2", "kind": "Setting", "metadata": {"name": "replica-soft-anti-affinity"}, "value": "true"},
 {"apiVersion": "longhorn.io/v1beta2", "kind": "Node", "metadata": {"name": "worker-1"},
  "spec": {"allowScheduling": true, "disks": {
   "disk-a": {"path": "/mnt/a", "allowScheduling": true},
   "disk-b": {"path": "/mnt/b", "allowScheduling": true}}},
  "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Schedulable", "status": "True"}],
   "diskStatus": {
    "disk-a": {"diskUUID": "a", "storageMaximum": 107374182400, "storageAvailable": 107374182400, "conditions": [{"type": "Schedulable", "status": "True"}]},
    "disk-b": {"diskUUID": "b", "storageMaximum": 214748364800, "storageAvailable": 214748364800, "conditions": [{"type": "Schedulable", "status": "True"}]}}}},
 {"apiVersion": "longhorn.io/v1beta2", "kind": "Volume", "metadata": {"name": "pvc-1"},
  "spec": {"size": "10737418240", "numberOfReplicas": 3, "replicaDiskSoftAntiAffinity": "disabled"}}]}`

func ExamplePlace() {
	c, err := longhorn.ReadState("state.json", []byte(exampleState))
	if err != nil {
		fmt.Println(err)
		return
	}
	plan, err := longhorn.Place(c, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(plan.Text())
	// Output:
	// place pvc-1 -> worker-1 disk-b (/mnt/b)
	// place pvc-1 -> worker-1 disk-a (/mnt/a)
	// unschedulable pvc-1: 1 missing: 0/1 nodes available: 2 hard disk anti-affinity
}
