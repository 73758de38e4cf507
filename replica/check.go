package replica

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sparsesync/sparsesync/sparse"
)

// SalvageWindow is how much older than the newest head a replica's head may
// be and still be a salvage candidate (strictly less: exactly 5 s older is out).
const SalvageWindow = 5 * time.Second

// Replica modes decided by the start check.
const (
	ModeRW  = "RW"
	ModeERR = "ERR"
)

// probe is what the start check knows about one directory, read without
// modifying anything.
type probe struct {
	info   Info
	hdr    header
	err    error // the directory cannot be used at all
	revErr error // the counter cannot be read
	rev    int64
	cs     counterState
}

func probeDir(dir string, boot ID) probe {
	p := probe{info: Info{Dir: dir}}
	chain, vm, err := Chain(dir)
	if err != nil {
		p.err = err
		return p
	}
	p.info.Size, p.info.Head, p.info.Chain = vm.Size, vm.Head, chain
	f, err := os.Open(filepath.Join(dir, vm.Head))
	if err != nil {
		p.err = err
		return p
	}
	st, err := sparse.Stat(f)
	f.Close()
	if err != nil {
		p.err = err
		return p
	}
	p.info.HeadModTimeNs, p.info.HeadAllocatedBytes = st.ModTime.UnixNano(), st.Allocated

	cf, ids, err := readCounters(dir, chain)
	if err != nil {
		p.err = err
		return p
	}
	cs, err := cf.judge(dir, ids, boot)
	if err != nil {
		p.err = err
		return p
	}
	p.cs = cs
	p.info.IgnoredHeader = cs.ignored
	if cs.haveHdr {
		p.hdr, p.info.HasHeader, p.info.Epoch = cs.hdr, true, cs.hdr.epoch
	}
	p.info.CounterMode = cs.mode
	p.info.CounterEnabled = cs.mode.Enabled()
	if !p.info.CounterEnabled {
		return p
	}
	if cs.rcErr != nil {
		p.revErr = cs.rcErr
		return p
	}
	// The count is the highest the files claim: Longhorn keeps
	// revision.counter current and ignores replica.hdr, so after Longhorn
	// wrote into a directory of ours the counter file is ahead of the
	// header, and a replica lacking those writes must not look equal.
	// Foreign writes on top of an unclean count are reported apart (the
	// start check cannot order them).
	p.rev = cs.own
	p.info.Revision = &p.rev
	p.info.ForeignWrites = cs.foreign
	return p
}

// InspectOptions configure Inspect and Check.
type InspectOptions struct {
	// BootID overrides the kernel's boot id (tests simulate a reboot).
	BootID *ID
}

func (o InspectOptions) bootID() (ID, error) {
	if o.BootID != nil {
		return *o.BootID, nil
	}
	return currentBootID()
}

// Inspect describes the replica in dir without modifying it. It works on
// directories Longhorn wrote as well as ours. Revision is the count the
// start check uses: the live counter of a replica opened since the last
// boot, else the count persisted at its last flush (or Longhorn's
// revision.counter).
func Inspect(dir string, o *InspectOptions) (Info, error) {
	opts := orZero(o)
	boot, err := opts.bootID()
	if err != nil {
		return Info{}, err
	}
	p := probeDir(dir, boot)
	if p.err != nil {
		return p.info, p.err
	}
	if p.revErr != nil {
		return p.info, p.revErr
	}
	return p.info, nil
}

// CheckOptions configure the start check.
type CheckOptions struct {
	// Counter is the volume's counter setting: true on, false off, nil:
	// the mode most replicas recorded (a tie counts as on, the stricter).
	Counter *bool
	// Salvage asks, with the counter off, to keep exactly the one replica
	// most likely to hold every acknowledged write.
	Salvage bool
	InspectOptions
}

// CheckResult is the verdict on one replica.
type CheckResult struct {
	Dir    string `json:"dir"`
	Mode   string `json:"mode"`
	Reason string `json:"reason"`
	Info   Info   `json:"-"`
}

// CheckReport is the outcome of the start check, replicas in input order.
type CheckReport struct {
	Replicas       []CheckResult `json:"replicas"`
	RW             []string      `json:"rw"`
	CounterEnabled bool          `json:"revision_counter_enabled"`
}

// Check runs the start check over the replica directories of one volume
// and says which are RW and why the others are ERR. It only reads.
//
//  1. unreadable metadata or head, or a size other than most replicas': ERR
//  2. recorded counter mode differs from the volume's: ERR
//  3. replica.hdr of another volume (when a strict majority shares one
//     volume id), or an epoch below the highest (demoted by the engine): ERR
//  4. counter on: unreadable/garbage counter: ERR; count below the
//     highest: ERR; a replica holding another writer's writes on top of
//     an unclean count of ours, and every sibling at or above that count:
//     ERR, order undecided (the error matches ErrOrderUndecided)
//  5. counter off + salvage: candidates have head mtime strictly within
//     5 s of the newest; the one with the most allocated bytes wins, then
//     the later mtime, then the lowest path; all others ERR
//  6. counter off, no salvage: the rest stay RW
//
// When no replica is RW the report is returned with an error matching
// ErrNoHealthyReplica (Longhorn would start anyway).
func Check(dirs []string, o *CheckOptions) (CheckReport, error) {
	opts := orZero(o)
	boot, err := opts.bootID()
	if err != nil {
		return CheckReport{}, err
	}
	probes := make([]probe, len(dirs))
	for i, d := range dirs {
		probes[i] = probeDir(d, boot)
	}
	return decide(probes, opts)
}

func decide(probes []probe, opts CheckOptions) (rep CheckReport, err error) {
	var undecided []string
	res := make([]CheckResult, len(probes))
	alive := func(i int) bool { return res[i].Mode == ModeRW }
	on, off := 0, 0
	for i, p := range probes {
		res[i] = CheckResult{Dir: p.info.Dir, Mode: ModeRW, Info: p.info}
		switch {
		case p.err != nil:
			res[i].Mode, res[i].Reason = ModeERR, p.err.Error()
		case p.info.CounterEnabled:
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
			sizes[p.info.Size]++
		}
	}
	var volSize int64
	best := 0
	for _, i := range stableOrder(probes) {
		if n := sizes[probes[i].info.Size]; alive(i) && n > best {
			volSize, best = probes[i].info.Size, n
		}
	}
	for i, p := range probes {
		if alive(i) && p.info.Size != volSize {
			res[i].Mode, res[i].Reason = ModeERR, fmt.Sprintf("size %d differs from the volume's %d", p.info.Size, volSize)
			if p.info.CounterEnabled {
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
		if alive(i) && p.info.CounterEnabled != enabled {
			errf(i, "revision counter %s, volume has it %s", onOff(p.info.CounterEnabled), onOff(enabled))
		}
	}

	// Volume identity and epochs (our header only).
	votes := map[ID]int{}
	for i, p := range probes {
		if alive(i) && p.info.HasHeader {
			votes[p.hdr.volumeID]++
		}
	}
	// Only a strict majority defines the volume: replicas created one by
	// one (each its own volume id) are not told apart.
	var vol ID
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
		if majority && alive(i) && p.info.HasHeader && p.hdr.volumeID != vol {
			errf(i, "belongs to volume %s, the others to %s", p.hdr.volumeID, vol)
		}
		if alive(i) {
			maxEpoch = max(maxEpoch, p.info.Epoch)
		}
	}
	for i, p := range probes {
		if alive(i) && p.info.Epoch < maxEpoch {
			errf(i, "epoch %d below %d: demoted by the engine", p.info.Epoch, maxEpoch)
		}
	}

	switch {
	case enabled:
		undecided = countCheck(probes, res)
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
	if len(undecided) > 0 {
		return rep, fmt.Errorf("%w: %s holds writes of another writer on top of a count its writer left unclean",
			ErrOrderUndecided, strings.Join(undecided, ", "))
	}
	if len(rep.RW) == 0 {
		return rep, fmt.Errorf("%w among %d replicas", ErrNoHealthyReplica, len(res))
	}
	return rep, nil
}

// countCheck is the counter-on rule: every replica whose count is below
// the highest is ERR, the others RW (Longhorn's, control.go). A replica
// with foreign writes (probe.cs.foreign: revision.counter moved past the
// count we last wrote while our header was unclean) holds its own count B
// plus at least that many writes of another writer: it is ahead of a
// sibling below B, but against a sibling at or above B neither holds all
// the other's writes for certain, so both are ERR and the order is
// undecided. It returns the directories holding foreign writes that made
// the order undecided.
func countCheck(probes []probe, res []CheckResult) (undecided []string) {
	alive := func(i int) bool { return res[i].Mode == ModeRW }
	for i, p := range probes {
		if alive(i) && p.revErr != nil {
			res[i].Mode, res[i].Reason = ModeERR, fmt.Sprintf("revision counter unreadable: %v", p.revErr)
		}
	}
	eff := func(i int) int64 { return probes[i].rev + probes[i].cs.foreign }
	why := map[int]string{}
	for f, pf := range probes {
		if !alive(f) || pf.cs.foreign == 0 {
			continue
		}
		var with []string
		for j, pj := range probes {
			if j != f && alive(j) && pj.rev >= pf.rev {
				with = append(with, fmt.Sprintf("%s (revision %d)", pj.info.Dir, pj.rev))
				why[j] = fmt.Sprintf("order cannot be decided: %s holds %d writes of ours and at least %d of another writer (%s moved past the %d we last wrote)",
					pf.info.Dir, pf.rev, pf.cs.foreign, RevisionCounterFile, pf.cs.lastRC)
			}
		}
		if len(with) > 0 {
			undecided = append(undecided, pf.info.Dir)
			why[f] = fmt.Sprintf("order cannot be decided: %s (this replica) holds %d writes of ours and at least %d of another writer (%s moved past the %d we last wrote), against %s",
				pf.info.Dir, pf.rev, pf.cs.foreign, RevisionCounterFile, pf.cs.lastRC, strings.Join(with, ", "))
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
		case p.cs.foreign > 0:
			res[i].Reason = fmt.Sprintf("revision %d+%d (ours, then at least %d of another writer) is the highest", p.rev, p.cs.foreign, p.cs.foreign)
		default:
			res[i].Reason = fmt.Sprintf("revision %d is the highest", p.rev)
		}
	}
	return undecided
}

// salvage keeps exactly one of the RW replicas (Longhorn's rule, §4 of the
// design note): newest-mtime window, then most allocated bytes, later
// mtime, lowest path.
func salvage(probes []probe, res []CheckResult) {
	var newest int64
	first := true
	for i, p := range probes {
		if res[i].Mode == ModeRW && (first || p.info.HeadModTimeNs > newest) {
			newest, first = p.info.HeadModTimeNs, false
		}
	}
	win := -1
	for _, i := range stableOrder(probes) {
		p := probes[i]
		if res[i].Mode != ModeRW {
			continue
		}
		if p.info.HeadModTimeNs+int64(SalvageWindow) <= newest {
			res[i].Mode = ModeERR
			res[i].Reason = fmt.Sprintf("salvage: head modified %s before the newest (window %s)",
				time.Duration(newest-p.info.HeadModTimeNs), SalvageWindow)
			continue
		}
		if win < 0 {
			win = i
			continue
		}
		w := probes[win].info
		if p.info.HeadAllocatedBytes > w.HeadAllocatedBytes ||
			p.info.HeadAllocatedBytes == w.HeadAllocatedBytes && p.info.HeadModTimeNs > w.HeadModTimeNs {
			win = i
		}
	}
	for i := range res {
		if res[i].Mode != ModeRW {
			continue
		}
		if i == win {
			res[i].Reason = fmt.Sprintf("salvage: chosen (%d allocated bytes, newest in window)", probes[i].info.HeadAllocatedBytes)
			continue
		}
		w := probes[win].info
		res[i].Mode = ModeERR
		res[i].Reason = fmt.Sprintf("salvage: %s chosen (%d allocated bytes vs %d, head modified %s vs %s)",
			w.Dir, w.HeadAllocatedBytes, probes[i].info.HeadAllocatedBytes, mtimeText(w.HeadModTimeNs), mtimeText(probes[i].info.HeadModTimeNs))
	}
}

// mtimeText renders a head's modification time for people: UTC, to the
// nanosecond, since the salvage rule compares them that finely.
func mtimeText(ns int64) string {
	return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.000000000 UTC")
}

// stableOrder returns probe indexes sorted by cleaned directory path, so the
// same set of replicas gives the same answer whatever the argument order.
func stableOrder(probes []probe) []int {
	idx := make([]int, len(probes))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Compare(filepath.Clean(probes[a].info.Dir), filepath.Clean(probes[b].info.Dir))
	})
	return idx
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
