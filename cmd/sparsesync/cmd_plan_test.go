package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// planState is a two-node cluster: n1 has a pressured disk d1 and a roomy
// d2; volume "a" (best-effort) has its replica on n1/d1, volume "b" needs
// two replicas.
const planState = `{"apiVersion": "v1", "kind": "List", "items": [
 {"apiVersion": "longhorn.io/v1beta2", "kind": "Setting", "metadata": {"name": "replica-auto-balance"}, "value": "best-effort"},
 {"apiVersion": "longhorn.io/v1beta2", "kind": "Setting", "metadata": {"name": "guaranteed-engine-manager-cpu"}, "value": "12"},
 {"apiVersion": "longhorn.io/v1beta2", "kind": "Node", "metadata": {"name": "n1"},
  "spec": {"allowScheduling": true, "disks": {
    "d1": {"path": "/mnt/d1", "allowScheduling": true},
    "d2": {"path": "/mnt/d2", "allowScheduling": true}}},
  "status": {"zone": "z1", "conditions": [{"type": "Ready", "status": "True"}, {"type": "Schedulable", "status": "True"}],
   "diskStatus": {
    "d1": {"diskUUID": "u1", "storageMaximum": 100000, "storageAvailable": 5000, "storageScheduled": 3000, "conditions": [{"type": "Schedulable", "status": "True"}]},
    "d2": {"diskUUID": "u2", "storageMaximum": 100000, "storageAvailable": 100000, "storageScheduled": 0, "conditions": [{"type": "Schedulable", "status": "True"}]}}}},
 {"apiVersion": "longhorn.io/v1beta2", "kind": "Node", "metadata": {"name": "n2"},
  "spec": {"allowScheduling": true, "disks": {"d1": {"path": "/data", "allowScheduling": true}}},
  "status": {"zone": "z2", "conditions": [{"type": "Ready", "status": "True"}, {"type": "Schedulable", "status": "True"}],
   "diskStatus": {"d1": {"diskUUID": "u3", "storageMaximum": 50000, "storageAvailable": 50000, "conditions": [{"type": "Schedulable", "status": "True"}]}}}},
 {"apiVersion": "longhorn.io/v1beta2", "kind": "Volume", "metadata": {"name": "a"}, "spec": {"size": "3000", "numberOfReplicas": 1}, "status": {"robustness": "healthy", "actualSize": 3000}},
 {"apiVersion": "longhorn.io/v1beta2", "kind": "Volume", "metadata": {"name": "b"}, "spec": {"size": "1000", "numberOfReplicas": 3}},
 {"apiVersion": "longhorn.io/v1beta2", "kind": "Replica", "metadata": {"name": "a-r1"}, "spec": {"volumeName": "a", "nodeID": "n1", "diskID": "u1"}, "status": {"currentState": "running"}}
]}`

const planK8sNodes = `{"apiVersion": "v1", "kind": "List", "items": [
 {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4"}}},
 {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}, "status": {"allocatable": {"cpu": "1255m"}}}]}`

func writeState(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// runPlanCLI runs "sparsesync args..." in-process and returns stdout, the
// exit status main would use, and the error.
func runPlanCLI(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	out, _, code, err := runCLI(t, args...)
	return out, code, err
}

func TestPlanRegistered(t *testing.T) {
	root := newRootCommand(&globalOpts{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}})
	c, _, err := root.Find([]string{"plan", "place"})
	require.NoError(t, err)
	assert.Equal(t, "place", c.Name(), "newPlanCommand must be listed in root.go's subcommands")
}

func TestPlanPlace(t *testing.T) {
	state := writeState(t, "state.json", planState)
	out, code, err := runPlanCLI(t, "plan", "place", "--state", state)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	// b: n1 first (d1 is too full for the 25 % minimum, d2 has 100000
	// usable against n2's 50000), then n2; the third replica meets hard
	// node anti-affinity on both nodes.
	assert.Equal(t, "place b -> n1 d2 (/mnt/d2)\nplace b -> n2 d1 (/data)\n"+
		"unschedulable b: 1 missing: 0/2 nodes available: 2 hard node anti-affinity\n", out)

	out, _, err = runPlanCLI(t, "plan", "place", "--state", state, "--volume", "b", "--json")
	require.NoError(t, err)
	var got struct {
		Placements []struct {
			Volume, Node, Disk string
			DiskPath           string `json:"disk_path"`
		}
		Unschedulable []struct {
			Volume  string
			Missing int
			Reasons map[string]int
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Len(t, got.Placements, 2)
	assert.Equal(t, "/mnt/d2", got.Placements[0].DiskPath)
	require.Len(t, got.Unschedulable, 1)
	assert.Equal(t, map[string]int{"hard node anti-affinity": 2}, got.Unschedulable[0].Reasons)

	_, code, err = runPlanCLI(t, "plan", "place", "--state", state, "--volume", "nope")
	require.Error(t, err)
	assert.Equal(t, 1, code)
	assert.Contains(t, errorLine(err), `volume "nope"`)
}

func TestPlanRebalance(t *testing.T) {
	state := writeState(t, "state.json", planState)
	out, code, err := runPlanCLI(t, "plan", "rebalance", "--state", state)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.Equal(t, "pass 1: a a-r1: n1 d1 -> n1 d2 (disk-pressure)\n", out)

	out, _, err = runPlanCLI(t, "plan", "rebalance", "--state", state, "--until-stable", "--json")
	require.NoError(t, err)
	var got struct {
		Passes [][]struct {
			Volume, Replica, Reason string
			From, To                struct{ Node, Disk string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Len(t, got.Passes, 1)
	require.Len(t, got.Passes[0], 1)
	m := got.Passes[0][0]
	assert.Equal(t, "disk-pressure", m.Reason)
	assert.Equal(t, struct{ Node, Disk string }{"n1", "d1"}, m.From)
	assert.Equal(t, struct{ Node, Disk string }{"n1", "d2"}, m.To)
}

func TestPlanCPU(t *testing.T) {
	state := writeState(t, "state.json", planState)
	nodes := writeState(t, "nodes.json", planK8sNodes)
	out, code, err := runPlanCLI(t, "plan", "cpu", "--state", state, "--state", nodes)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.Equal(t, "n1: allocatable 4000m, engine manager 480m, replica manager 480m\n"+
		"n2: allocatable 1255m, engine manager 151m, replica manager 151m\n", out)

	// Without the Kubernetes nodes the requests cannot be computed: the
	// plan is printed, then exit status 1.
	out, code, err = runPlanCLI(t, "plan", "cpu", "--state", state, "--json")
	require.Error(t, err)
	assert.Equal(t, 1, code)
	var got struct {
		Nodes  []map[string]any
		Errors []string
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Len(t, got.Nodes, 2)
	assert.Len(t, got.Errors, 4)
	assert.Contains(t, errorLine(err), "status.allocatable.cpu")

	bad := writeState(t, "bad.json", strings.Replace(planState, `"value": "12"`, `"value": "41"`, 1))
	_, code, err = runPlanCLI(t, "plan", "cpu", "--state", bad, "--state", nodes)
	require.Error(t, err)
	assert.Equal(t, 1, code)
	assert.Contains(t, err.Error(), "guaranteed-engine-manager-cpu: value 41 should be between 0 to 40")
}

func TestPlanCPUMigrate(t *testing.T) {
	state := writeState(t, "state.json", strings.Replace(planState, `"guaranteed-engine-manager-cpu"}, "value": "12"`,
		`"guaranteed-engine-cpu"}, "value": "0.25"`, 1))
	out, code, err := runPlanCLI(t, "plan", "cpu", "--state", state, "--migrate-from-deprecated")
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.Equal(t, `node/n1 spec.engineManagerCPURequest: "0" -> "250"
node/n1 spec.replicaManagerCPURequest: "0" -> "250"
node/n2 spec.engineManagerCPURequest: "0" -> "250"
node/n2 spec.replicaManagerCPURequest: "0" -> "250"
setting/guaranteed-engine-cpu value: "0.25" -> "" (read-only from now on: any non-empty value is rejected)
`, out)
}

func TestPlanErrors(t *testing.T) {
	_, code, err := runPlanCLI(t, "plan", "place")
	require.Error(t, err)
	assert.Equal(t, 2, code, "missing --state is a usage error")

	_, code, err = runPlanCLI(t, "plan", "place", "--state", filepath.Join(t.TempDir(), "missing.json"))
	require.Error(t, err)
	assert.Equal(t, 1, code)
	assert.Contains(t, errorLine(err), "missing.json")

	bad := writeState(t, "bad.json", `{"apiVersion": "longhorn.io/v1beta2", "kind": "Replica", "metadata": {"name": "r"}, "spec": {"volumeName": "v", "nodeID": "n"}}`)
	_, code, err = runPlanCLI(t, "plan", "place", "--state", bad)
	require.Error(t, err)
	assert.Equal(t, 1, code)
	line := errorLine(err)
	assert.NotContains(t, line, "\n")
	assert.Contains(t, line, `replica "r": spec.volumeName: no volume "v"`)

	notJSON := writeState(t, "x.json", "not json")
	_, code, err = runPlanCLI(t, "plan", "rebalance", "--state", notJSON)
	require.Error(t, err)
	assert.Equal(t, 1, code)
	assert.Contains(t, errorLine(err), "x.json: not JSON")

	state := writeState(t, "state.json", planState)
	_, code, err = runPlanCLI(t, "plan", "place", "--state", state, "--now", "yesterday")
	require.Error(t, err)
	assert.Equal(t, 2, code)
}

// pressureState is n1 with a pressured d1 (5 % unused) holding one replica
// of each of vols (1 replica each, the given actual size), and a roomy d2.
func pressureState(actual int, vols ...string) string {
	var b strings.Builder
	b.WriteString(`{"apiVersion": "v1", "kind": "List", "items": [
 {"apiVersion": "longhorn.io/v1beta2", "kind": "Setting", "metadata": {"name": "replica-auto-balance"}, "value": "best-effort"},
 {"apiVersion": "longhorn.io/v1beta2", "kind": "Node", "metadata": {"name": "n1"},
  "spec": {"allowScheduling": true, "disks": {"d1": {"path": "/mnt/d1", "allowScheduling": true}, "d2": {"path": "/mnt/d2", "allowScheduling": true}}},
  "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Schedulable", "status": "True"}], "diskStatus": {
    "d1": {"diskUUID": "u1", "storageMaximum": 100000, "storageAvailable": 5000, "conditions": [{"type": "Schedulable", "status": "True"}]},
    "d2": {"diskUUID": "u2", "storageMaximum": 1000000, "storageAvailable": 1000000, "conditions": [{"type": "Schedulable", "status": "True"}]}}}}`)
	for _, v := range vols {
		fmt.Fprintf(&b, `,
 {"apiVersion": "longhorn.io/v1beta2", "kind": "Volume", "metadata": {"name": %q}, "spec": {"size": "3000", "numberOfReplicas": 1}, "status": {"robustness": "healthy", "actualSize": %d}},
 {"apiVersion": "longhorn.io/v1beta2", "kind": "Replica", "metadata": {"name": "%s-r"}, "spec": {"volumeName": %q, "nodeID": "n1", "diskID": "u1"}, "status": {"currentState": "running"}}`, v, actual, v, v)
	}
	b.WriteString("]}")
	return b.String()
}

// TestPlanRebalanceHeld: a pressured disk whose replica frees nothing is
// not left silent, in text and JSON, and --until-stable ends.
func TestPlanRebalanceHeld(t *testing.T) {
	state := writeState(t, "state.json", pressureState(0, "a", "b", "c"))
	out, code, err := runPlanCLI(t, "plan", "rebalance", "--state", state, "--until-stable")
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.Equal(t, "nothing to move\nheld n1 d1 (95% used, pressure above 90%): replica a-r of volume a: "+
		"moving the replica would not lower the disk's used share (its volume's actual size is 0)\n", out)

	out, _, err = runPlanCLI(t, "plan", "rebalance", "--state", state, "--json")
	require.NoError(t, err)
	var got struct {
		Passes [][]any
		Held   []struct{ Node, Disk, Replica, Reason string }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Empty(t, got.Passes)
	require.Len(t, got.Held, 1)
	assert.Equal(t, "a-r", got.Held[0].Replica)
	assert.Contains(t, got.Held[0].Reason, "actual size is 0")
}

// TestPlanRebalancePassLimit: at --max-passes every computed pass is
// printed, then the error names the replica still moving and its disk.
func TestPlanRebalancePassLimit(t *testing.T) {
	state := writeState(t, "state.json", pressureState(3000, "a", "b", "c"))
	out, code, err := runPlanCLI(t, "plan", "rebalance", "--state", state, "--until-stable", "--max-passes", "1")
	require.Error(t, err)
	assert.Equal(t, 1, code)
	assert.Equal(t, "pass 1: a a-r: n1 d1 -> n1 d2 (disk-pressure)\n", out)
	assert.Contains(t, errorLine(err), "after 1 passes, pass 2 still moves 1 replica(s): b-r from n1 d1 (disk-pressure)")

	out, _, err = runPlanCLI(t, "plan", "rebalance", "--state", state, "--until-stable")
	require.NoError(t, err)
	assert.Equal(t, "pass 1: a a-r: n1 d1 -> n1 d2 (disk-pressure)\npass 2: b b-r: n1 d1 -> n1 d2 (disk-pressure)\n", out)
}

// TestPlanPlaceWaiting: a replica waited for is named with the time the
// replenishment wait ends, in text and JSON, instead of a bare "nothing
// to place".
func TestPlanPlaceWaiting(t *testing.T) {
	doc := strings.Replace(planState,
		`"spec": {"size": "1000", "numberOfReplicas": 3}}`,
		`"spec": {"size": "1000", "numberOfReplicas": 1}, "status": {"robustness": "degraded", "lastDegradedAt": "2026-01-01T00:00:00Z"}}`, 1)
	doc = strings.TrimSuffix(doc, "\n]}") + `,
 {"apiVersion": "longhorn.io/v1beta2", "kind": "Replica", "metadata": {"name": "b-r1"}, "spec": {"volumeName": "b", "nodeID": "n2", "diskID": "u3", "failedAt": "2026-01-01T00:00:00Z"}}]}`
	state := writeState(t, "state.json", doc)
	out, code, err := runPlanCLI(t, "plan", "place", "--state", state, "--now", "2026-01-01T00:05:00Z")
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.Equal(t, "nothing to place\nwait b: failed replica b-r1 on n2 d1 may be reused until the replenishment wait ends at 2026-01-01T00:10:00Z\n", out)

	out, _, err = runPlanCLI(t, "plan", "place", "--state", state, "--now", "2026-01-01T00:05:00Z", "--json")
	require.NoError(t, err)
	var got struct {
		Waiting []struct{ Volume, Replica, Until string }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Len(t, got.Waiting, 1)
	assert.Equal(t, "b-r1", got.Waiting[0].Replica)
	assert.Equal(t, "2026-01-01T00:10:00Z", got.Waiting[0].Until)

	// After the wait the replica is replaced and nothing is waited for.
	out, _, err = runPlanCLI(t, "plan", "place", "--state", state, "--now", "2026-01-01T00:10:00Z")
	require.NoError(t, err)
	assert.NotContains(t, out, "wait ")
	assert.Contains(t, out, "place b -> ")
}
