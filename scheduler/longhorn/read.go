package longhorn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxStateBytes bounds one input document; a larger one is refused before
// it is parsed.
const MaxStateBytes = 512 << 20

// Loader accumulates the objects of one or more state documents (the output
// of `kubectl get ... -o json`: a List, a single object, or several JSON
// values one after another) and builds a [Cluster]. Objects of the same kind
// and name may appear only once across all documents. A Loader is not safe
// for concurrent use.
type Loader struct {
	settings  []rawSetting
	lhNodes   []rawLonghornNode
	k8sNodes  []rawK8sNode
	volumes   []rawVolume
	replicas  []rawReplica
	seen      map[string]string // kind/name -> where first seen
	itemCount int

	perKind bool // test hook: parse every object the per-kind way only
}

// ReadState parses one document and returns the cluster it describes.
// name is used in error messages (usually the file name).
func ReadState(name string, data []byte) (*Cluster, error) {
	var l Loader
	if err := l.Add(name, data); err != nil {
		return nil, err
	}
	return l.Cluster()
}

// Add parses one document. name is used in error messages.
func (l *Loader) Add(name string, data []byte) error {
	if len(data) > MaxStateBytes {
		return errorf("%s: %d bytes is more than the %d-byte limit", name, len(data), MaxStateBytes)
	}
	// A UTF-8 byte-order mark (some Windows editors write one) is not
	// JSON, but it says nothing either: skip it.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	// One JSON value (what kubectl prints) is parsed in place; the
	// streaming decoder, which copies its input as it buffers it, is for
	// several values one after another.
	if !l.perKind {
		// Parsing checks the syntax first, so a separate json.Valid pass
		// over a large state is not needed: a syntax error means several
		// values (or no JSON), for the decoder below.
		var ul anyList
		var syn *json.SyntaxError
		switch err := json.Unmarshal(data, &ul); {
		case err == nil:
			return l.addList(name, data, &ul, 0)
		case !errors.As(err, &syn):
			return l.addObject(name, data, 0)
		}
	} else if json.Valid(data) {
		return l.addObject(name, data, 0)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	n := 0
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return errorf("%s: not JSON: %v", name, err)
		}
		where := name
		if n > 0 {
			where = name + ": document " + strconv.Itoa(n+1)
		}
		if err := l.addObject(where, raw, 0); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return errorf("%s: empty document", name)
	}
	return nil
}

type typeMeta struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
	Metadata   objectMeta        `json:"metadata"`
}

type objectMeta struct {
	Name              string  `json:"name"`
	DeletionTimestamp *string `json:"deletionTimestamp"`
}

func (l *Loader) addObject(where string, raw json.RawMessage, depth int) error {
	if depth > 4 {
		return errorf("%s: lists nested too deeply", where)
	}
	if !l.perKind {
		// A list parses in one pass with its items typed: parsing the
		// list with raw items and then each item again validated and
		// scanned every byte twice more (most of reading a large state).
		var ul anyList
		if json.Unmarshal(raw, &ul) == nil {
			return l.addList(where, raw, &ul, depth)
		}
	}
	var u anyObject
	if !l.perKind && json.Unmarshal(raw, &u) == nil {
		return l.addParsed(where, raw, &u, depth)
	}
	return l.addParsed(where, raw, nil, depth)
}

// addList adds an object parsed as anyList: its items, already typed, if
// it is a list, else the object itself.
func (l *Loader) addList(where string, raw json.RawMessage, ul *anyList, depth int) error {
	if !isListKind(ul.Kind) {
		return l.addParsed(where, raw, &ul.anyObject, depth)
	}
	if ul.Items == nil && ul.Kind != "List" {
		return errorf("%s: kind %q without items", where, ul.Kind)
	}
	for i := range ul.Items {
		item := where + ": items[" + strconv.Itoa(i) + "]"
		if depth+1 > 4 {
			return errorf("%s: lists nested too deeply", item)
		}
		if err := l.addParsed(item, nil, &ul.Items[i], depth+1); err != nil {
			return err
		}
	}
	return nil
}

// isListKind says whether kind is a list of objects ("List", "VolumeList").
func isListKind(kind string) bool { return kind == "List" || strings.HasSuffix(kind, "List") }

// anyList is anyObject with its items parsed too: the outer Items, being
// shallower, takes the "items" key from the embedded one.
type anyList struct {
	anyObject
	Items []anyObject `json:"items"`
}

// addParsed adds one object: from u when it parsed as anyObject (raw is
// then unused), else by parsing raw per kind.
func (l *Loader) addParsed(where string, raw json.RawMessage, u *anyObject, depth int) error {
	fast := u != nil
	var tm typeMeta
	if fast {
		tm = typeMeta{APIVersion: u.APIVersion, Kind: u.Kind, Items: u.Items, Metadata: u.Metadata}
	} else if err := json.Unmarshal(raw, &tm); err != nil {
		return errorf("%s: %v", where, jsonErr(err))
	}
	// decode fills dst (a per-kind struct) from u when the object parsed
	// as anyObject, else by parsing it again.
	decode := func(dst any) error {
		if !fast {
			return json.Unmarshal(raw, dst)
		}
		switch d := dst.(type) {
		case *rawK8sNode:
			d.Metadata, d.Status = u.Metadata, u.Status.k8sNodeStatus
		case *rawSetting:
			d.Metadata, d.Value = u.Metadata, u.Value
		case *rawLonghornNode:
			d.Metadata, d.Spec, d.Status = u.Metadata, u.Spec.lhNodeSpec, u.Status.lhNodeStatus
		case *rawVolume:
			d.Metadata, d.Spec, d.Status = u.Metadata, u.Spec.volumeSpec, u.Status.volumeStatus
		case *rawReplica:
			d.Metadata, d.Status = u.Metadata, u.Status.replicaStatus
			d.Spec = replicaSpec{replicaRef: u.Spec.replicaRef, EvictionRequested: u.Spec.lhNodeSpec.EvictionRequested}
		}
		return nil
	}
	if isListKind(tm.Kind) {
		if tm.Items == nil && tm.Kind != "List" {
			return errorf("%s: kind %q without items", where, tm.Kind)
		}
		for i, it := range tm.Items {
			if err := l.addObject(where+": items["+strconv.Itoa(i)+"]", it, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	group, version, _ := strings.Cut(tm.APIVersion, "/")
	if version == "" {
		group, version = "", group
	}
	obj := where + " (" + tm.Kind + " " + strconv.Quote(tm.Metadata.Name) + ")"
	if tm.Kind == "" {
		return errorf("%s: kind: missing", where)
	}
	if tm.Metadata.Name == "" {
		return errorf("%s: metadata.name: missing", obj)
	}
	key := tm.Kind + "/" + group + "/" + tm.Metadata.Name
	if l.seen == nil {
		l.seen = make(map[string]string)
	}
	if first, dup := l.seen[key]; dup {
		return errorf("%s: metadata.name: duplicate of %s", obj, first)
	}
	l.seen[key] = obj
	l.itemCount++
	if group == "" && tm.Kind == "Node" {
		if version != "v1" {
			return errorf("%s: apiVersion: %q is not v1", obj, tm.APIVersion)
		}
		return decodeItem(decode, obj, &l.k8sNodes)
	}
	if group != "longhorn.io" {
		return errorf("%s: apiVersion: %q: unsupported kind %s (want longhorn.io/v1beta2 Setting, Node, Volume, Replica or v1 Node)", obj, tm.APIVersion, tm.Kind)
	}
	if version != "v1beta2" {
		return errorf("%s: apiVersion: %q is not longhorn.io/v1beta2", obj, tm.APIVersion)
	}
	switch tm.Kind {
	case "Setting":
		return decodeItem(decode, obj, &l.settings)
	case "Node":
		return decodeItem(decode, obj, &l.lhNodes)
	case "Volume":
		return decodeItem(decode, obj, &l.volumes)
	case "Replica":
		return decodeItem(decode, obj, &l.replicas)
	}
	return errorf("%s: kind: unsupported kind %q (want Setting, Node, Volume or Replica)", obj, tm.Kind)
}

// located is the place an object was read from, for messages; each raw
// object type embeds it.
type located struct{ where string }

func (l *located) locate(where string) { l.where = where }

// decodeItem decodes one object of type T, records where it was read and
// appends it to dst.
func decodeItem[T any, P interface {
	*T
	locate(string)
}](decode func(any) error, obj string, dst *[]T) error {
	var v T
	if err := decode(&v); err != nil {
		return errorf("%s: %v", obj, jsonErr(err))
	}
	P(&v).locate(obj)
	*dst = append(*dst, v)
	return nil
}

// jsonErr shortens encoding/json errors to name the field.
func jsonErr(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return "JSON " + jsonValue(te.Value) + " where " + jsonWant(te.Type) + " is expected"
		}
		return te.Field + ": cannot use JSON " + jsonValue(te.Value) + " as " + jsonWant(te.Type)
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return fe.Error()
	}
	return err.Error()
}

// jsonValue renames encoding/json's "bool" (a Go word) to "boolean".
func jsonValue(v string) string {
	if v == "bool" {
		return "boolean"
	}
	return v
}

// jsonWant names what a Go type accepts in JSON terms ("an integer", "an
// object"), so that errors never show Go type names.
func jsonWant(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.String {
			return "a list of strings"
		}
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another JSON type"
}

// fieldError is returned by the lenient number types.
type fieldError struct{ msg string }

func (e *fieldError) Error() string { return e.msg }

// int64Field accepts a JSON number or a string of digits (Longhorn writes
// spec.size and spec.volumeSize as strings).
type int64Field int64

func (f *int64Field) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
		if s == "" {
			*f = 0
			return nil
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// encoding/json adds the field path to this error type.
		return &json.UnmarshalTypeError{Value: "value " + strconv.Quote(truncate(s, 40)), Type: reflect.TypeFor[int64]()}
	}
	*f = int64Field(n)
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

type rawCondition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
}

func conditionTrue(cs []rawCondition, typ string) bool {
	for _, c := range cs {
		if c.Type == typ {
			return c.Status == "True"
		}
	}
	return false
}

type rawSetting struct {
	located
	Metadata objectMeta `json:"metadata"`
	Value    *string    `json:"value"`
}

// diskMap decodes a map of disks entry by entry so that an error names the
// disk: "spec.disks[disk-1].storageReserved: ...".
type diskMap[T any] map[string]*T

func (m *diskMap[T]) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	field := "spec.disks"
	if _, status := any((*T)(nil)).(*rawDiskStatus); status {
		field = "status.diskStatus"
	}
	out := make(diskMap[T], len(raw))
	// In name order: with two bad disks, the error names the same one
	// every time (map order would pick one at random).
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		r := raw[name]
		if string(r) == "null" {
			out[name] = nil
			continue
		}
		v := new(T)
		if err := json.Unmarshal(r, v); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return &fieldError{msg: fmt.Sprintf("%s[%s].%s: cannot use JSON %s as %s", field, name, te.Field, jsonValue(te.Value), jsonWant(te.Type))}
			}
			return &fieldError{msg: fmt.Sprintf("%s[%s]: %v", field, name, err)}
		}
		out[name] = v
	}
	*m = out
	return nil
}

type rawDiskSpec struct {
	DiskType          string     `json:"diskType"`
	Path              string     `json:"path"`
	AllowScheduling   bool       `json:"allowScheduling"`
	EvictionRequested bool       `json:"evictionRequested"`
	StorageReserved   int64Field `json:"storageReserved"`
	Tags              []string   `json:"tags"`
}

type rawDiskStatus struct {
	Conditions       []rawCondition `json:"conditions"`
	StorageAvailable int64Field     `json:"storageAvailable"`
	StorageScheduled int64Field     `json:"storageScheduled"`
	StorageMaximum   int64Field     `json:"storageMaximum"`
	DiskUUID         string         `json:"diskUUID"`
	DiskType         string         `json:"diskType"`
}

type rawLonghornNode struct {
	located
	Metadata objectMeta   `json:"metadata"`
	Spec     lhNodeSpec   `json:"spec"`
	Status   lhNodeStatus `json:"status"`
}

type lhNodeSpec struct {
	Disks                     diskMap[rawDiskSpec] `json:"disks"`
	AllowScheduling           bool                 `json:"allowScheduling"`
	EvictionRequested         bool                 `json:"evictionRequested"`
	Tags                      []string             `json:"tags"`
	EngineManagerCPURequest   int64Field           `json:"engineManagerCPURequest"`
	ReplicaManagerCPURequest  int64Field           `json:"replicaManagerCPURequest"`
	InstanceManagerCPURequest int64Field           `json:"instanceManagerCPURequest"`
}

type lhNodeStatus struct {
	Conditions []rawCondition         `json:"conditions"`
	DiskStatus diskMap[rawDiskStatus] `json:"diskStatus"`
	Region     string                 `json:"region"`
	Zone       string                 `json:"zone"`
}

type rawK8sNode struct {
	located
	Metadata objectMeta    `json:"metadata"`
	Status   k8sNodeStatus `json:"status"`
}

type k8sNodeStatus struct {
	Allocatable map[string]string `json:"allocatable"`
}

type rawVolume struct {
	located
	Metadata objectMeta   `json:"metadata"`
	Spec     volumeSpec   `json:"spec"`
	Status   volumeStatus `json:"status"`
}

type volumeSpec struct {
	Size                        int64Field `json:"size"`
	NumberOfReplicas            *int       `json:"numberOfReplicas"`
	DataEngine                  string     `json:"dataEngine"`
	NodeSelector                []string   `json:"nodeSelector"`
	DiskSelector                []string   `json:"diskSelector"`
	ReplicaSoftAntiAffinity     string     `json:"replicaSoftAntiAffinity"`
	ReplicaZoneSoftAntiAffinity string     `json:"replicaZoneSoftAntiAffinity"`
	ReplicaDiskSoftAntiAffinity string     `json:"replicaDiskSoftAntiAffinity"`
	ReplicaAutoBalance          string     `json:"replicaAutoBalance"`
}

type volumeStatus struct {
	ActualSize     int64Field `json:"actualSize"`
	Robustness     string     `json:"robustness"`
	LastDegradedAt string     `json:"lastDegradedAt"`
}

type rawReplica struct {
	located
	Metadata objectMeta    `json:"metadata"`
	Spec     replicaSpec   `json:"spec"`
	Status   replicaStatus `json:"status"`
}

type replicaSpec struct {
	replicaRef
	EvictionRequested bool `json:"evictionRequested"`
}

// replicaRef is the replica's spec but evictionRequested, which a node's
// spec has too (see anyObject).
type replicaRef struct {
	VolumeName        string `json:"volumeName"`
	NodeID            string `json:"nodeID"`
	DiskID            string `json:"diskID"`
	FailedAt          string `json:"failedAt"`
	RebuildRetryCount int    `json:"rebuildRetryCount"`
	HardNodeAffinity  string `json:"hardNodeAffinity"`
}

type replicaStatus struct {
	EvictionRequested bool   `json:"evictionRequested"`
	CurrentState      string `json:"currentState"`
}

// anyObject is every field of every kind the reader takes, so that an
// object is parsed once. Its field types are those of the per-kind structs,
// so whenever it parses, each per-kind struct would have parsed to the same
// values; when it does not (a field of another kind with an odd type, or a
// real error), the object is parsed again the per-kind way, which gives the
// error (or the value) that way of reading it always gave.
type anyObject struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
	Metadata   objectMeta        `json:"metadata"`
	Value      *string           `json:"value"`
	Spec       struct {
		lhNodeSpec // with evictionRequested, also the replica's
		volumeSpec
		replicaRef
	} `json:"spec"`
	Status struct {
		lhNodeStatus
		k8sNodeStatus
		volumeStatus
		replicaStatus
	} `json:"status"`
}

// Cluster validates the accumulated objects and builds the cluster.
func (l *Loader) Cluster() (*Cluster, error) {
	if l.itemCount == 0 {
		return nil, errorf("state: no Longhorn objects")
	}
	c := &Cluster{Settings: DefaultSettings()}
	for _, s := range l.settings {
		if s.Value == nil {
			continue // a setting without value keeps its default
		}
		if err := c.Settings.Set(s.Metadata.Name, *s.Value); err != nil {
			return nil, errorf("%s: %v", s.where, err)
		}
	}
	k8s := make(map[string]rawK8sNode, len(l.k8sNodes))
	for _, n := range l.k8sNodes {
		k8s[n.Metadata.Name] = n
	}
	for _, rn := range l.lhNodes {
		n, err := buildNode(rn)
		if err != nil {
			return nil, err
		}
		if kn, ok := k8s[n.Name]; ok {
			if q, ok := kn.Status.Allocatable["cpu"]; ok {
				m, err := parseMilliCPU(q)
				if err != nil {
					return nil, errorf("%s: status.allocatable.cpu: %v", kn.where, err)
				}
				n.AllocatableMilliCPU, n.HasAllocatable = m, true
			}
		}
		c.Nodes = append(c.Nodes, n)
	}
	for _, rv := range l.volumes {
		v, err := buildVolume(rv)
		if err != nil {
			return nil, err
		}
		c.Volumes = append(c.Volumes, v)
	}
	for _, rr := range l.replicas {
		r := &Replica{
			Name:              rr.Metadata.Name,
			Deleting:          rr.Metadata.DeletionTimestamp != nil && *rr.Metadata.DeletionTimestamp != "",
			VolumeName:        rr.Spec.VolumeName,
			NodeID:            rr.Spec.NodeID,
			DiskID:            rr.Spec.DiskID,
			FailedAt:          rr.Spec.FailedAt,
			RebuildRetryCount: rr.Spec.RebuildRetryCount,
			EvictionRequested: rr.Spec.EvictionRequested || rr.Status.EvictionRequested,
			HardNodeAffinity:  rr.Spec.HardNodeAffinity,
			CurrentState:      rr.Status.CurrentState,
		}
		if r.VolumeName == "" {
			return nil, errorf("%s: spec.volumeName: missing", rr.where)
		}
		c.Replicas = append(c.Replicas, r)
	}
	if err := c.Index(); err != nil {
		return nil, err
	}
	return c, nil
}

func buildNode(rn rawLonghornNode) (*Node, error) {
	n := &Node{
		Name:                      rn.Metadata.Name,
		Deleting:                  rn.Metadata.DeletionTimestamp != nil && *rn.Metadata.DeletionTimestamp != "",
		Ready:                     conditionTrue(rn.Status.Conditions, "Ready"),
		Schedulable:               conditionTrue(rn.Status.Conditions, "Schedulable"),
		AllowScheduling:           rn.Spec.AllowScheduling,
		EvictionRequested:         rn.Spec.EvictionRequested,
		Tags:                      rn.Spec.Tags,
		Zone:                      rn.Status.Zone,
		Region:                    rn.Status.Region,
		EngineManagerCPURequest:   int64(rn.Spec.EngineManagerCPURequest),
		ReplicaManagerCPURequest:  int64(rn.Spec.ReplicaManagerCPURequest),
		InstanceManagerCPURequest: int64(rn.Spec.InstanceManagerCPURequest),
	}
	for name, ds := range rn.Spec.Disks {
		if ds == nil {
			return nil, errorf("%s: spec.disks[%s]: null", rn.where, name)
		}
		d := &Disk{
			Name:              name,
			Path:              ds.Path,
			Type:              ds.DiskType,
			AllowScheduling:   ds.AllowScheduling,
			EvictionRequested: ds.EvictionRequested,
			Tags:              ds.Tags,
			StorageReserved:   int64(ds.StorageReserved),
		}
		if d.StorageReserved < 0 {
			return nil, errorf("%s: spec.disks[%s].storageReserved: negative size %d", rn.where, name, d.StorageReserved)
		}
		if st := rn.Status.DiskStatus[name]; st != nil {
			d.HasStatus = true
			d.UUID = st.DiskUUID
			d.Schedulable = conditionTrue(st.Conditions, "Schedulable")
			d.StorageMaximum = int64(st.StorageMaximum)
			d.StorageAvailable = int64(st.StorageAvailable)
			d.StorageScheduled = int64(st.StorageScheduled)
			if d.Type == "" {
				d.Type = st.DiskType
			}
			for _, f := range []struct {
				field string
				v     int64
			}{{"storageMaximum", d.StorageMaximum}, {"storageAvailable", d.StorageAvailable}, {"storageScheduled", d.StorageScheduled}} {
				if f.v < 0 {
					return nil, errorf("%s: status.diskStatus[%s].%s: negative size %d", rn.where, name, f.field, f.v)
				}
			}
		}
		switch d.Type {
		case "":
			d.Type = "filesystem"
		case "filesystem", "block":
		default:
			return nil, errorf("%s: spec.disks[%s].diskType: %q is not filesystem or block", rn.where, name, d.Type)
		}
		n.Disks = append(n.Disks, d)
	}
	uuids := make(map[string]string, len(n.Disks))
	for _, d := range n.Disks {
		if d.UUID == "" {
			continue
		}
		if other, dup := uuids[d.UUID]; dup {
			a, b := min(other, d.Name), max(other, d.Name)
			return nil, errorf("%s: status.diskStatus[%s].diskUUID: %q also used by disk %s", rn.where, b, d.UUID, a)
		}
		uuids[d.UUID] = d.Name
	}
	return n, nil
}

func buildVolume(rv rawVolume) (*Volume, error) {
	v := &Volume{
		Name:                        rv.Metadata.Name,
		Deleting:                    rv.Metadata.DeletionTimestamp != nil && *rv.Metadata.DeletionTimestamp != "",
		Size:                        int64(rv.Spec.Size),
		ActualSize:                  int64(rv.Status.ActualSize),
		NumberOfReplicas:            3, // Longhorn's default-replica-count
		DataEngine:                  rv.Spec.DataEngine,
		NodeSelector:                rv.Spec.NodeSelector,
		DiskSelector:                rv.Spec.DiskSelector,
		ReplicaSoftAntiAffinity:     rv.Spec.ReplicaSoftAntiAffinity,
		ReplicaZoneSoftAntiAffinity: rv.Spec.ReplicaZoneSoftAntiAffinity,
		ReplicaDiskSoftAntiAffinity: rv.Spec.ReplicaDiskSoftAntiAffinity,
		ReplicaAutoBalance:          rv.Spec.ReplicaAutoBalance,
		Robustness:                  rv.Status.Robustness,
	}
	if rv.Spec.NumberOfReplicas != nil {
		v.NumberOfReplicas = *rv.Spec.NumberOfReplicas
	}
	if s := rv.Status.LastDegradedAt; s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil, errorf("%s: status.lastDegradedAt: %q is not an RFC 3339 time", rv.where, truncate(s, 40))
		}
		v.LastDegradedAt = t
	}
	// Range checks with the object's location; Index repeats them for
	// hand-built clusters.
	switch {
	case v.Size < 0:
		return nil, errorf("%s: spec.size: negative size %d", rv.where, v.Size)
	case v.ActualSize < 0:
		return nil, errorf("%s: status.actualSize: negative size %d", rv.where, v.ActualSize)
	case v.NumberOfReplicas < MinReplicas || v.NumberOfReplicas > MaxReplicas:
		return nil, errorf("%s: spec.numberOfReplicas: %d is not in %d..%d", rv.where, v.NumberOfReplicas, MinReplicas, MaxReplicas)
	}
	return v, nil
}

// parseMilliCPU parses a Kubernetes CPU quantity ("4", "3.5", "3500m")
// into milli-CPU, rounding up as Kubernetes does.
func parseMilliCPU(q string) (int64, error) {
	s := strings.TrimSpace(q)
	if s == "" {
		return 0, &fieldError{msg: "empty quantity"}
	}
	if m, ok := strings.CutSuffix(s, "m"); ok {
		n, err := strconv.ParseInt(m, 10, 64)
		if err != nil || n < 0 || n > 1e15 {
			return 0, &fieldError{msg: strconv.Quote(truncate(q, 40)) + " is not a CPU quantity"}
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) || f > 1e12 {
		return 0, &fieldError{msg: strconv.Quote(truncate(q, 40)) + " is not a CPU quantity"}
	}
	return int64(math.Ceil(f*1000 - 1e-9)), nil
}
