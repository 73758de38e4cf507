package ganeti

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ReadJSON reads the JSON form of a cluster: the Cluster type with its JSON
// field names (groups, nodes, instances, tags, policy). Node and instance
// references are indices; "snode" is -1 and "spindles" -1 when absent.
// Unknown fields are errors. name is used in error messages.
//
//	{"groups": [{"name": "g1", "uuid": "u1", "alloc_policy": "preferred", "policy": {...}}],
//	 "nodes": [{"name": "n1", "total_mem": 4096, "node_mem": 0, "free_mem": 4096,
//	            "total_disk": 102400, "free_disk": 102400, "total_cpu": 8,
//	            "group": 0, "spindles": 1, "free_spindles": 0, "os_cpus": 1, "cpu_speed": 1}],
//	 "instances": [{"name": "i1", "mem": 512, "disk": 0, "vcpus": 1, "status": "running",
//	                "auto_balance": true, "pnode": 0, "snode": -1, "disk_template": "ext",
//	                "spindle_use": 1, "spindles": -1}],
//	 "tags": [], "policy": {...}}
//
// A missing policy (cluster or group) means DefaultIPolicy.
func ReadJSON(r io.Reader, name string) (*Cluster, error) {
	data, err := readInput(r, name)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Cluster
	if err := dec.Decode(&c); err != nil {
		pe := &ParseError{File: name, Err: fmt.Errorf("%w: %v", ErrSyntax, err)}
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			pe.Line = lineOf(data, se.Offset)
		case errors.As(err, &te):
			pe.Line = lineOf(data, te.Offset)
			pe.Field = te.Field
		}
		return nil, pe
	}
	if c.Policy.isZero() {
		c.Policy = DefaultIPolicy()
	}
	for i := range c.Groups {
		if c.Groups[i].Policy.isZero() {
			c.Groups[i].Policy = DefaultIPolicy()
		}
	}
	if err := validate(&c); err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			pe.File = name
		}
		return nil, err
	}
	return &c, nil
}

func (p *IPolicy) isZero() bool {
	return len(p.MinMax) == 0 && p.Std == (ISpec{}) && len(p.DiskTemplates) == 0 && p.VCPURatio == 0 && p.SpindleRatio == 0
}

func lineOf(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// WriteJSON writes c in the form ReadJSON reads.
func WriteJSON(w io.Writer, c *Cluster) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}
