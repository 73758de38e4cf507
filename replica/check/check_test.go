package check

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// The rules on probes alone, no file read: the table tests over real
// directories are replica's (TestCheckTable, TestCheckLonghornDirectories).
func TestDecide(t *testing.T) {
	on, off := true, false
	const s = int64(time.Second)
	cases := []struct {
		name   string
		probes []Probe
		opts   Options
		rw     []string
		undec  []string
	}{
		{"unreadable directory is ERR", []Probe{{Dir: "a", Size: 1, CounterEnabled: true, Revision: 3}, {Dir: "b", Err: errors.New("no volume.meta")}},
			Options{}, []string{"a"}, nil},
		{"size of the majority", []Probe{{Dir: "a", Size: 1}, {Dir: "b", Size: 2}, {Dir: "c", Size: 2}},
			Options{Counter: &off}, []string{"b", "c"}, nil},
		{"counter on: the highest count", []Probe{{Dir: "a", CounterEnabled: true, Revision: 4}, {Dir: "b", CounterEnabled: true, Revision: 5}},
			Options{}, []string{"b"}, nil},
		{"counter on: unreadable count", []Probe{{Dir: "a", CounterEnabled: true, Revision: 4}, {Dir: "b", CounterEnabled: true, CounterErr: errors.New("garbage")}},
			Options{Counter: &on}, []string{"a"}, nil},
		{"mode differs from the volume's", []Probe{{Dir: "a", CounterEnabled: true, Revision: 9}, {Dir: "b"}},
			Options{Counter: &off}, []string{"b"}, nil},
		{"epoch below the highest", []Probe{{Dir: "a", HasHeader: true, Volume: "v", Epoch: 1}, {Dir: "b", HasHeader: true, Volume: "v", Epoch: 2}},
			Options{Counter: &off}, []string{"b"}, nil},
		{"another volume's replica", []Probe{{Dir: "a", HasHeader: true, Volume: "v"}, {Dir: "b", HasHeader: true, Volume: "v"}, {Dir: "c", HasHeader: true, Volume: "w"}},
			Options{Counter: &off}, []string{"a", "b"}, nil},
		{"salvage: exactly the window is out", []Probe{{Dir: "a", HeadModTimeNs: 10 * s, HeadAllocatedBytes: 1}, {Dir: "b", HeadModTimeNs: 5 * s, HeadAllocatedBytes: 9}},
			Options{Counter: &off, Salvage: true}, []string{"a"}, nil},
		{"salvage: inside the window, more bytes wins", []Probe{{Dir: "a", HeadModTimeNs: 10 * s, HeadAllocatedBytes: 1}, {Dir: "b", HeadModTimeNs: 5*s + 1, HeadAllocatedBytes: 9}},
			Options{Counter: &off, Salvage: true}, []string{"b"}, nil},
		{"foreign writes against an equal count: undecided", []Probe{{Dir: "a", CounterEnabled: true, Revision: 5, ForeignWrites: 2}, {Dir: "b", CounterEnabled: true, Revision: 5}},
			Options{}, nil, []string{"a"}},
		{"foreign writes above a lower count", []Probe{{Dir: "a", CounterEnabled: true, Revision: 5, ForeignWrites: 2}, {Dir: "b", CounterEnabled: true, Revision: 4}},
			Options{}, []string{"a"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := Decide(tc.probes, &tc.opts)
			if !slices.Equal(rep.RW, tc.rw) || !slices.Equal(rep.Undecided, tc.undec) {
				t.Fatalf("RW %v undecided %v, want %v and %v (%+v)", rep.RW, rep.Undecided, tc.rw, tc.undec, rep.Replicas)
			}
			for _, r := range rep.Replicas {
				if r.Reason == "" && r.Mode == ModeERR {
					t.Errorf("%s is ERR without a reason", r.Dir)
				}
			}
			rev := slices.Clone(tc.probes)
			slices.Reverse(rev)
			rep2 := Decide(rev, &tc.opts)
			if !slices.Equal(slices.Sorted(slices.Values(rep2.RW)), slices.Sorted(slices.Values(rep.RW))) {
				t.Errorf("reversed input: RW %v, want %v", rep2.RW, rep.RW)
			}
		})
	}
}
