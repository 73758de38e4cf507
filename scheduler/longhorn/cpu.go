package longhorn

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxManagerCPUPercentage is the limit on each guaranteed-*-cpu setting and
// on their sum (Longhorn 1.1-1.4).
const MaxManagerCPUPercentage = 40

// NodeCPU is the CPU request, in milli-CPU, of the manager pods on one node.
// 0 means the pod gets no CPU request. With the split settings (Longhorn
// 1.1-1.4) the engine and replica manager fields are set; with the merged
// setting (1.5 and later) only the instance manager field is.
type NodeCPU struct {
	Node                    string `json:"node"`
	AllocatableMilliCPU     int64  `json:"allocatable_milli_cpu"`
	EngineManagerMilliCPU   *int64 `json:"engine_manager_milli_cpu,omitempty"`
	ReplicaManagerMilliCPU  *int64 `json:"replica_manager_milli_cpu,omitempty"`
	InstanceManagerMilliCPU *int64 `json:"instance_manager_milli_cpu,omitempty"`
}

// CPUPlan is the result of [PlanCPU]: a request per node (in node name
// order) and every validation error found.
type CPUPlan struct {
	Merged bool      `json:"-"` // the merged 1.5+ form was used
	Nodes  []NodeCPU `json:"nodes"`
	Errors []string  `json:"errors"`
}

// PlanCPU validates the CPU reservation settings and node overrides and
// computes each node's manager requests: the node's override if non-zero,
// else round(allocatable milli-CPU × percentage / 100). It reports every
// violation rather than stopping at the first; a setting that is invalid
// contributes no request. It does not modify c.
func PlanCPU(c *Cluster) *CPUPlan {
	s := &c.Settings
	p := &CPUPlan{Nodes: []NodeCPU{}, Errors: []string{}}
	errf := func(format string, args ...any) { p.Errors = append(p.Errors, fmt.Sprintf(format, args...)) }
	if s.GuaranteedInstanceManagerCPU != "" && !s.SplitCPUSettingsGiven {
		planMergedCPU(c, p, errf)
		return p
	}
	eng, engOK := splitPercent(SettingGuaranteedEngineManagerCPU, s.GuaranteedEngineManagerCPU, errf)
	rep, repOK := splitPercent(SettingGuaranteedReplicaManagerCPU, s.GuaranteedReplicaManagerCPU, errf)
	if engOK && repOK && eng+rep > MaxManagerCPUPercentage {
		errf("settings %s + %s: %d%% + %d%% = %d%%: the sum should not be smaller than 0%% or greater than %d%%",
			SettingGuaranteedEngineManagerCPU, SettingGuaranteedReplicaManagerCPU, eng, rep, eng+rep, MaxManagerCPUPercentage)
	}
	for _, n := range c.Nodes {
		out := NodeCPU{Node: n.Name, AllocatableMilliCPU: n.AllocatableMilliCPU}
		fields := []struct {
			name  string
			value int64
			pct   int64
			ok    bool
			dst   **int64
		}{
			{"spec.engineManagerCPURequest", n.EngineManagerCPURequest, eng, engOK, &out.EngineManagerMilliCPU},
			{"spec.replicaManagerCPURequest", n.ReplicaManagerCPURequest, rep, repOK, &out.ReplicaManagerMilliCPU},
		}
		valid := true
		for _, f := range fields {
			if f.value < 0 {
				errf("node %q: %s: %d should not be negative", n.Name, f.name, f.value)
				valid = false
			}
		}
		overridden := n.EngineManagerCPURequest != 0 || n.ReplicaManagerCPURequest != 0
		if valid && overridden {
			if !n.HasAllocatable || n.AllocatableMilliCPU == 0 {
				errf("node %q: status.allocatable.cpu: unknown (give the Kubernetes nodes), cannot check %s and %s against the %d%% limit",
					n.Name, fields[0].name, fields[1].name, MaxManagerCPUPercentage)
			} else {
				var pcts [2]int64
				for i, f := range fields {
					pcts[i] = f.pct
					if f.value != 0 {
						pcts[i] = int64(math.Round(float64(f.value) / float64(n.AllocatableMilliCPU) * 100))
					}
				}
				if pcts[0]+pcts[1] > MaxManagerCPUPercentage {
					errf("node %q: %s + %s: %d%% + %d%% = %d%% of %dm allocatable: the sum should not be greater than %d%%",
						n.Name, fields[0].name, fields[1].name, pcts[0], pcts[1], pcts[0]+pcts[1], n.AllocatableMilliCPU, MaxManagerCPUPercentage)
				}
			}
		}
		for _, f := range fields {
			var v int64
			switch {
			case f.value > 0:
				v = f.value
			case f.ok && f.pct > 0: // 0, or a negative value Longhorn would have rejected
				if !n.HasAllocatable {
					errf("node %q: status.allocatable.cpu: unknown (give the Kubernetes nodes), cannot compute %s from %d%%", n.Name, strings.TrimPrefix(f.name, "spec."), f.pct)
				}
				v = roundDiv(n.AllocatableMilliCPU*f.pct, 100)
			}
			*f.dst = &v
		}
		p.Nodes = append(p.Nodes, out)
	}
	return p
}

// roundDiv returns a/b rounded half away from zero, for a ≥ 0, b > 0.
func roundDiv(a, b int64) int64 { return a/b + (a%b*2)/b }

// splitPercent parses one of the 1.1-1.4 settings: an integer in 0..40.
func splitPercent(name, v string, errf func(string, ...any)) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		errf("setting %s: value %q is not an integer", name, v)
		return 0, false
	}
	if n < 0 || n > MaxManagerCPUPercentage {
		errf("setting %s: value %d should be between 0 to %d", name, n, MaxManagerCPUPercentage)
		return 0, false
	}
	return n, true
}

// mergedPercent parses guaranteed-instance-manager-cpu: a number, or (1.6
// and later) a JSON object per data engine, of which "v1" is used.
func mergedPercent(v string) (float64, error) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "{") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(v), &m); err != nil {
			return 0, fmt.Errorf("value %q is not a number or a JSON object", truncate(v, 60))
		}
		raw, ok := m["v1"]
		if !ok {
			return 0, fmt.Errorf("value %q has no \"v1\" entry", truncate(v, 60))
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			v = s
		} else {
			v = string(raw)
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("value %q is not a number", truncate(v, 60))
	}
	if f < 0 || f > MaxManagerCPUPercentage {
		return 0, fmt.Errorf("value %g should be between 0 to %d", f, MaxManagerCPUPercentage)
	}
	return f, nil
}

func planMergedCPU(c *Cluster, p *CPUPlan, errf func(string, ...any)) {
	p.Merged = true
	pct, err := mergedPercent(c.Settings.GuaranteedInstanceManagerCPU)
	ok := err == nil
	if err != nil {
		errf("setting %s: %v", SettingGuaranteedInstanceManagerCPU, err)
	}
	const field = "spec.instanceManagerCPURequest"
	for _, n := range c.Nodes {
		out := NodeCPU{Node: n.Name, AllocatableMilliCPU: n.AllocatableMilliCPU}
		var v int64
		switch {
		case n.InstanceManagerCPURequest < 0:
			errf("node %q: %s: %d should not be negative", n.Name, field, n.InstanceManagerCPURequest)
		case n.InstanceManagerCPURequest > 0:
			v = n.InstanceManagerCPURequest
			if !n.HasAllocatable || n.AllocatableMilliCPU == 0 {
				errf("node %q: status.allocatable.cpu: unknown (give the Kubernetes nodes), cannot check %s against the %d%% limit", n.Name, field, MaxManagerCPUPercentage)
			} else if q := math.Round(float64(v) / float64(n.AllocatableMilliCPU) * 100); q > MaxManagerCPUPercentage {
				errf("node %q: %s: %dm is %g%% of %dm allocatable: should not be greater than %d%%", n.Name, field, v, q, n.AllocatableMilliCPU, MaxManagerCPUPercentage)
			}
		case ok && pct > 0:
			if !n.HasAllocatable {
				errf("node %q: status.allocatable.cpu: unknown (give the Kubernetes nodes), cannot compute instanceManagerCPURequest from %g%%", n.Name, pct)
			}
			v = int64(math.Round(float64(n.AllocatableMilliCPU) * pct / 100))
		}
		out.InstanceManagerMilliCPU = &v
		p.Nodes = append(p.Nodes, out)
	}
}

// Change is one field an upgrade step would write.
type Change struct {
	Object string `json:"object"` // "node/NAME" or "setting/NAME"
	Field  string `json:"field"`
	From   string `json:"from"`
	To     string `json:"to"`
	Note   string `json:"note,omitempty"`
}

// MigrateDeprecatedCPU is the Longhorn 1.1.0 → 1.1.1 upgrade step: the old
// guaranteed-engine-cpu setting (cores, e.g. "0.25") becomes
// round(cores × 1000) milli-CPU in both spec.engineManagerCPURequest and
// spec.replicaManagerCPURequest of every node where the field is 0; then
// the old setting is emptied and becomes read-only. It returns the changes
// it would make (none when the old setting is empty) and does not modify c.
func MigrateDeprecatedCPU(c *Cluster) ([]Change, error) {
	old := strings.TrimSpace(c.Settings.GuaranteedEngineCPU)
	changes := []Change{}
	if old == "" {
		return changes, nil
	}
	cores, err := strconv.ParseFloat(old, 64)
	if err != nil || math.IsNaN(cores) || math.IsInf(cores, 0) || cores < 0 || cores > 1e9 {
		return nil, errorf("setting %q: value: %q is not a non-negative number of cores", SettingGuaranteedEngineCPU, truncate(old, 40))
	}
	milli := int64(math.Round(cores * 1000))
	if milli > 0 {
		for _, n := range c.Nodes {
			for _, f := range []struct {
				name string
				v    int64
			}{{"spec.engineManagerCPURequest", n.EngineManagerCPURequest}, {"spec.replicaManagerCPURequest", n.ReplicaManagerCPURequest}} {
				if f.v == 0 {
					changes = append(changes, Change{Object: "node/" + n.Name, Field: f.name, From: "0", To: strconv.FormatInt(milli, 10)})
				}
			}
		}
	}
	changes = append(changes, Change{
		Object: "setting/" + SettingGuaranteedEngineCPU, Field: "value", From: c.Settings.GuaranteedEngineCPU, To: "",
		Note: "read-only from now on: any non-empty value is rejected",
	})
	return changes, nil
}
