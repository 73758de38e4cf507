package check

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// SalvageWindow is how much older than the newest head a replica's head may
// be and still be a salvage candidate (strictly less: exactly 5 s older is out).
const SalvageWindow = 5 * time.Second

// Replica modes decided by the start check.
const (
	ModeRW  = "RW"
	ModeERR = "ERR"
)

// revisionCounterFile is Longhorn's counter file, named in reasons.
const revisionCounterFile = "revision.counter"

// Probe is what the start check knows about one replica directory, read
// without modifying anything (replica.Check reads it).
type Probe struct {
	Dir string
	// Err says why the directory cannot be used at all.
	Err error
	// Size is the volume size the replica records.
	Size int64
	// CounterEnabled is the counter mode the replica records.
	CounterEnabled bool
	// CounterErr, with the counter on, says why the count cannot be read.
	CounterErr error
	// Revision is the replica's own count of writes (counter on);
	// ForeignWrites > 0: our writer did not close and another writer
	// (Longhorn) counted at least that many writes on top, since the
	// LastRevisionCounter we wrote into revision.counter.
	Revision            int64
	ForeignWrites       int64
	LastRevisionCounter uint64
	// HasHeader: the replica has our replica.hdr, which names its Volume
	// and its membership Epoch (0 without a header).
	HasHeader bool
	Volume    string
	Epoch     uint64
	// The head image's modification time and allocated bytes (salvage).
	HeadModTimeNs      int64
	HeadAllocatedBytes int64
}

// Options are the volume's settings the check applies.
type Options struct {
	// Counter is the volume's counter setting: true on, false off, nil:
	// the mode most replicas recorded (a tie counts as on, the stricter).
	Counter *bool
	// Salvage asks, with the counter off, to keep exactly the one replica
	// most likely to hold every acknowledged write.
	Salvage bool
}

// Result is the verdict on one replica.
type Result struct {
	Dir    string `json:"dir"`
	Mode   string `json:"mode"`
	Reason string `json:"reason"`
}

// Report is the outcome of the start check, replicas in input order.
type Report struct {
	Replicas       []Result `json:"replicas"`
	RW             []string `json:"rw"`
	CounterEnabled bool     `json:"revision_counter_enabled"`
	// Undecided lists the replicas holding another writer's writes on top
	// of an unclean count whose order against a sibling cannot be decided
	// (rule 4); they and those siblings are ERR.
	Undecided []string `json:"-"`
}

// Decide applies the start check (the package's rules 1 to 6) to the
// probes of one volume's replicas. When no replica is RW, Report.RW is
// empty (Longhorn would start anyway).
func Decide(probes []Probe, o *Options) (rep Report) {
	var opts Options
	if o != nil {
		opts = *o
	}
	res := make([]Result, len(probes))
	alive := func(i int) bool { return res[i].Mode == ModeRW }
	on, off := 0, 0
	for i, p := range probes {
		res[i] = Result{Dir: p.Dir, Mode: ModeRW}
		switch {
		case p.Err != nil:
			res[i].Mode, res[i].Reason = ModeERR, p.Err.Error()
		case p.CounterEnabled:
			on++
		default:
			off++
		}
	}
	// Size: Longhorn's engine drops replicas whose size differs; the
	// volume's size is the one most replicas have (tie: the lowest path's).
	sizes := map[int64]int{}
	for i, p := range probes {
		if alive(i) {
			sizes[p.Size]++
		}
	}
	var volSize int64
	best := 0
	for _, i := range stableOrder(probes) {
		if n := sizes[probes[i].Size]; alive(i) && n > best {
			volSize, best = probes[i].Size, n
		}
	}
	for i, p := range probes {
		if alive(i) && p.Size != volSize {
			res[i].Mode, res[i].Reason = ModeERR, fmt.Sprintf("size %d differs from the volume's %d", p.Size, volSize)
			if p.CounterEnabled {
				on--
			} else {
				off--
			}
		}
	}
	enabled := on >= off
	if opts.Counter != nil {
		enabled = *opts.Counter
	}
	rep.CounterEnabled = enabled
	errf := func(i int, format string, args ...any) {
		res[i].Mode, res[i].Reason = ModeERR, fmt.Sprintf(format, args...)
	}
	for i, p := range probes {
		if alive(i) && p.CounterEnabled != enabled {
			errf(i, "revision counter %s, volume has it %s", onOff(p.CounterEnabled), onOff(enabled))
		}
	}

	// Volume identity and epochs (our header only).
	votes := map[string]int{}
	for i, p := range probes {
		if alive(i) && p.HasHeader {
			votes[p.Volume]++
		}
	}
	// Only a strict majority defines the volume: replicas created one by
	// one (each its own volume id) are not told apart.
	var vol string
	total := 0
	for _, n := range votes {
		total += n
	}
	majority := false
	for id, n := range votes {
		if 2*n > total {
			vol, majority = id, true
		}
	}
	var maxEpoch uint64
	for i, p := range probes {
		if majority && alive(i) && p.HasHeader && p.Volume != vol {
			errf(i, "belongs to volume %s, the others to %s", p.Volume, vol)
		}
		if alive(i) {
			maxEpoch = max(maxEpoch, p.Epoch)
		}
	}
	for i, p := range probes {
		if alive(i) && p.Epoch < maxEpoch {
			errf(i, "epoch %d below %d: demoted by the engine", p.Epoch, maxEpoch)
		}
	}

	switch {
	case enabled:
		rep.Undecided = countCheck(probes, res)
	case opts.Salvage:
		salvage(probes, res)
	default:
		for i := range res {
			if alive(i) {
				res[i].Reason = "revision counter off, no salvage requested: no check"
			}
		}
	}

	rep.Replicas = res
	for _, r := range res {
		if r.Mode == ModeRW {
			rep.RW = append(rep.RW, r.Dir)
		}
	}
	return rep
}

// countCheck is the counter-on rule: every replica whose count is below
// the highest is ERR, the others RW (Longhorn's, control.go). A replica
// with foreign writes (Probe.ForeignWrites: revision.counter moved past the
// count we last wrote while our header was unclean) holds its own count B
// plus at least that many writes of another writer: it is ahead of a
// sibling below B, but against a sibling at or above B neither holds all
// the other's writes for certain, so both are ERR and the order is
// undecided. It returns the directories holding foreign writes that made
// the order undecided.
func countCheck(probes []Probe, res []Result) (undecided []string) {
	alive := func(i int) bool { return res[i].Mode == ModeRW }
	for i, p := range probes {
		if alive(i) && p.CounterErr != nil {
			res[i].Mode, res[i].Reason = ModeERR, fmt.Sprintf("revision counter unreadable: %v", p.CounterErr)
		}
	}
	eff := func(i int) int64 { return probes[i].Revision + probes[i].ForeignWrites }
	why := map[int]string{}
	for f, pf := range probes {
		if !alive(f) || pf.ForeignWrites == 0 {
			continue
		}
		var with []string
		for j, pj := range probes {
			if j != f && alive(j) && pj.Revision >= pf.Revision {
				with = append(with, fmt.Sprintf("%s (revision %d)", pj.Dir, pj.Revision))
				why[j] = fmt.Sprintf("order cannot be decided: %s holds %d writes of ours and at least %d of another writer (%s moved past the %d we last wrote)",
					pf.Dir, pf.Revision, pf.ForeignWrites, revisionCounterFile, pf.LastRevisionCounter)
			}
		}
		if len(with) > 0 {
			undecided = append(undecided, pf.Dir)
			why[f] = fmt.Sprintf("order cannot be decided: %s (this replica) holds %d writes of ours and at least %d of another writer (%s moved past the %d we last wrote), against %s",
				pf.Dir, pf.Revision, pf.ForeignWrites, revisionCounterFile, pf.LastRevisionCounter, strings.Join(with, ", "))
		}
	}
	maxRev := int64(-1)
	for i := range probes {
		if alive(i) {
			maxRev = max(maxRev, eff(i))
		}
	}
	for i, p := range probes {
		switch {
		case !alive(i):
		case why[i] != "":
			res[i].Mode, res[i].Reason = ModeERR, why[i]
		case eff(i) < maxRev:
			res[i].Mode, res[i].Reason = ModeERR, fmt.Sprintf("revision %d below %d", eff(i), maxRev)
		case p.ForeignWrites > 0:
			res[i].Reason = fmt.Sprintf("revision %d+%d (ours, then at least %d of another writer) is the highest", p.Revision, p.ForeignWrites, p.ForeignWrites)
		default:
			res[i].Reason = fmt.Sprintf("revision %d is the highest", p.Revision)
		}
	}
	return undecided
}

// salvage keeps exactly one of the RW replicas (Longhorn's rule, §4 of the
// design note): newest-mtime window, then most allocated bytes, later
// mtime, lowest path.
func salvage(probes []Probe, res []Result) {
	var newest int64
	first := true
	for i, p := range probes {
		if res[i].Mode == ModeRW && (first || p.HeadModTimeNs > newest) {
			newest, first = p.HeadModTimeNs, false
		}
	}
	win := -1
	for _, i := range stableOrder(probes) {
		p := probes[i]
		if res[i].Mode != ModeRW {
			continue
		}
		if p.HeadModTimeNs+int64(SalvageWindow) <= newest {
			res[i].Mode = ModeERR
			res[i].Reason = fmt.Sprintf("salvage: head modified %s before the newest (window %s)",
				time.Duration(newest-p.HeadModTimeNs), SalvageWindow)
			continue
		}
		if win < 0 {
			win = i
			continue
		}
		w := probes[win]
		if p.HeadAllocatedBytes > w.HeadAllocatedBytes ||
			p.HeadAllocatedBytes == w.HeadAllocatedBytes && p.HeadModTimeNs > w.HeadModTimeNs {
			win = i
		}
	}
	for i := range res {
		if res[i].Mode != ModeRW {
			continue
		}
		if i == win {
			res[i].Reason = fmt.Sprintf("salvage: chosen (%d allocated bytes, newest in window)", probes[i].HeadAllocatedBytes)
			continue
		}
		w := probes[win]
		res[i].Mode = ModeERR
		res[i].Reason = fmt.Sprintf("salvage: %s chosen (%d allocated bytes vs %d, head modified %s vs %s)",
			w.Dir, w.HeadAllocatedBytes, probes[i].HeadAllocatedBytes, mtimeText(w.HeadModTimeNs), mtimeText(probes[i].HeadModTimeNs))
	}
}

// mtimeText renders a head's modification time for people: UTC, to the
// nanosecond, since the salvage rule compares them that finely.
func mtimeText(ns int64) string {
	return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.000000000 UTC")
}

// stableOrder returns probe indexes sorted by cleaned directory path, so the
// same set of replicas gives the same answer whatever the argument order.
func stableOrder(probes []Probe) []int {
	idx := make([]int, len(probes))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Compare(filepath.Clean(probes[a].Dir), filepath.Clean(probes[b].Dir))
	})
	return idx
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
