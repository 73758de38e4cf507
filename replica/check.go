package replica

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sparsesync/sparsesync/replica/check"
	"github.com/sparsesync/sparsesync/sparse"
)

// SalvageWindow is how much older than the newest head a replica's head may
// be and still be a salvage candidate (check.SalvageWindow).
const SalvageWindow = check.SalvageWindow

// Replica modes decided by the start check.
const (
	ModeRW  = check.ModeRW
	ModeERR = check.ModeERR
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
type CheckResult = check.Result

// CheckReport is the outcome of the start check, replicas in input order.
type CheckReport = check.Report

// Check runs the start check over the replica directories of one volume
// and says which are RW and why the others are ERR. It only reads: each
// directory is probed here, and the rules (package replica/check) decide.
//
// When a replica holds another writer's writes on top of an unclean count
// and a sibling's count is not below it, the report is returned with an
// error matching ErrOrderUndecided; when no replica is RW, with one
// matching ErrNoHealthyReplica (Longhorn would start anyway).
func Check(dirs []string, o *CheckOptions) (CheckReport, error) {
	opts := orZero(o)
	boot, err := opts.bootID()
	if err != nil {
		return CheckReport{}, err
	}
	probes := make([]check.Probe, len(dirs))
	for i, d := range dirs {
		probes[i] = probeDir(d, boot).forCheck()
	}
	rep := check.Decide(probes, &check.Options{Counter: opts.Counter, Salvage: opts.Salvage})
	if len(rep.Undecided) > 0 {
		return rep, fmt.Errorf("%w: %s holds writes of another writer on top of a count its writer left unclean",
			ErrOrderUndecided, strings.Join(rep.Undecided, ", "))
	}
	if len(rep.RW) == 0 {
		return rep, fmt.Errorf("%w among %d replicas", ErrNoHealthyReplica, len(rep.Replicas))
	}
	return rep, nil
}

// forCheck is what the start check's rules read of p.
func (p probe) forCheck() check.Probe {
	c := check.Probe{
		Dir:                 p.info.Dir,
		Err:                 p.err,
		Size:                p.info.Size,
		CounterEnabled:      p.info.CounterEnabled,
		CounterErr:          p.revErr,
		Revision:            p.rev,
		ForeignWrites:       p.cs.foreign,
		LastRevisionCounter: p.cs.lastRC,
		HasHeader:           p.info.HasHeader,
		Epoch:               p.info.Epoch,
		HeadModTimeNs:       p.info.HeadModTimeNs,
		HeadAllocatedBytes:  p.info.HeadAllocatedBytes,
	}
	if p.info.HasHeader {
		c.Volume = p.hdr.volumeID.String()
	}
	return c
}
