package longhorn

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// goTypeName matches Go type names an error must not show.
var goTypeName = regexp.MustCompile(`longhorn\.(raw|typeMeta|objectMeta|int64Field|diskMap)|\bas (u?int(8|16|32|64)?|float(32|64)|bool|string)\b|\[\]string|map\[|json\.RawMessage`)

// FuzzReadState feeds arbitrary bytes to the reader: it must return a
// cluster or an ErrBadState error, never panic, and every planner must run
// on what it accepts. Seeds are in testdata/fuzz/FuzzReadState.
func FuzzReadState(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"longhorn.io/v1beta2","kind":"Setting","metadata":{"name":"replica-auto-balance"},"value":"best-effort"},
{"apiVersion":"longhorn.io/v1beta2","kind":"Node","metadata":{"name":"n1"},"spec":{"allowScheduling":true,"disks":{"d":{"path":"/d","allowScheduling":true,"storageReserved":0}}},
 "status":{"zone":"z","conditions":[{"type":"Ready","status":"True"},{"type":"Schedulable","status":"True"}],
 "diskStatus":{"d":{"diskUUID":"u","storageMaximum":100,"storageAvailable":5,"storageScheduled":10,"conditions":[{"type":"Schedulable","status":"True"}]}}}},
{"apiVersion":"longhorn.io/v1beta2","kind":"Volume","metadata":{"name":"v"},"spec":{"size":"10","numberOfReplicas":2},"status":{"robustness":"healthy","actualSize":3}},
{"apiVersion":"longhorn.io/v1beta2","kind":"Replica","metadata":{"name":"r"},"spec":{"volumeName":"v","nodeID":"n1","diskID":"u"}},
{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"},"status":{"allocatable":{"cpu":"2"}}}]}`))
	f.Add([]byte(`{"apiVersion":"longhorn.io/v1beta2","kind":"Volume","metadata":{"name":"v"},"spec":{"size":"-1"}}`))
	f.Add([]byte(`[{"kind":"List"}]`))
	f.Add([]byte(`{"apiVersion":"longhorn.io/v1beta2","kind":"Node","metadata":{"name":"n"},"spec":{"disks":[1]}}`))
	f.Add([]byte(`{"apiVersion":"longhorn.io/v1beta2","kind":"Node","metadata":{"name":"n"},"spec":{"disks":{"d":{"tags":"x"}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			t.Skip("large input")
		}
		c, err := ReadState("fuzz", data)
		// The one-parse reading and the per-kind one agree.
		slow := Loader{perKind: true}
		serr := slow.Add("fuzz", data)
		var sc *Cluster
		if serr == nil {
			sc, serr = slow.Cluster()
		}
		if fmt.Sprint(err) != fmt.Sprint(serr) || (err == nil && !reflect.DeepEqual(c, sc)) {
			t.Fatalf("one-parse and per-kind readings differ: %v / %v", err, serr)
		}
		if err != nil {
			if !errors.Is(err, ErrBadState) {
				t.Fatalf("error without ErrBadState: %v", err)
			}
			// Errors speak JSON, not Go: no package-qualified or
			// built-in Go type names.
			if m := goTypeName.FindString(err.Error()); m != "" && !strings.Contains(string(data), m) {
				t.Fatalf("error shows Go type %q: %v", m, err)
			}
			return
		}
		if _, err := Place(c, &PlaceOptions{}); err != nil {
			t.Fatalf("Place on accepted state: %v", err)
		}
		if _, err := RebalanceUntilStable(c, &RebalanceOptions{MaxPasses: 50}); err != nil && !errors.Is(err, ErrNotStable) {
			t.Fatalf("Rebalance on accepted state: %v", err)
		}
		PlanCPU(c)
		_, _ = MigrateDeprecatedCPU(c)
	})
}
