package replica

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// StagingDir is the subdirectory of a rebuild target that holds the copy
// until it is published. Longhorn reads only the top level of a replica
// directory (replica.go readMetadata: every *.meta there is a disk;
// tryRecoverVolumeMetaFile: a missing volume.meta is re-created from the
// first entry whose name contains "volume-head"), and this name neither
// ends in .meta nor contains volume-head, so nothing inside it can be
// adopted. Our Open, Chain and Check read only the top level too.
const StagingDir = ".sparsesync-rebuild"

// stagingPath returns target's staging directory.
func stagingPath(target string) string { return filepath.Join(target, StagingDir) }

// Stage is a rebuild's staging directory in a target replica directory:
// the on-disk protocol that keeps the target unadoptable until the copy
// is whole (Demote, the copy into Dir, Finish, Publish; Purge on failure).
// The caller holds the target's lock (LockDir). A Stage is not safe for
// concurrent use.
type Stage struct {
	target, dir string
	fault       func(step, name string) error
}

// NewStage returns the staging of target. fault, when not nil, is called
// after each step ("demote", "publish", "committed") with the file name;
// its error fails the step (tests stop a rebuild there).
func NewStage(target string, fault func(step, name string) error) *Stage {
	return &Stage{target: target, dir: stagingPath(target), fault: fault}
}

// Dir returns the staging directory, where the copy is made.
func (s *Stage) Dir() string { return s.dir }

// Target returns the target replica directory.
func (s *Stage) Target() string { return s.target }

func (s *Stage) injected(step, name string) error {
	if s.fault == nil {
		return nil
	}
	return s.fault(step, name)
}

// committed reports whether target's top level holds a published replica:
// a volume.meta not marked Rebuilding whose head's .meta exists. Before a
// rebuild's commit the head's .meta is never at the top level, and without
// it neither Longhorn (replica.go Chain: "failed to find metadata" for the
// head) nor we (chainOf) open the directory.
func committed(target string) bool {
	vm, err := ReadVolumeMeta(target)
	if err != nil || vm.Rebuilding {
		return false
	}
	_, err = os.Lstat(filepath.Join(target, MetaName(vm.Head)))
	return err == nil
}

// pendingRebuild reports whether dir has a staging directory and its
// top level lacks the .meta of head (head "" when volume.meta is
// unreadable): a rebuild has not committed (see publish).
func pendingRebuild(dir, head string) bool {
	if fi, err := os.Lstat(stagingPath(dir)); err != nil || !fi.IsDir() {
		return false
	}
	if head == "" {
		return true
	}
	_, err := os.Lstat(filepath.Join(dir, MetaName(head)))
	return errors.Is(err, fs.ErrNotExist)
}

// topLevelOrder lists the replica files at target's top level in the
// order that keeps the directory unadoptable once the first is gone:
// the .meta of volume.meta's head first (without it Longhorn's Chain and
// our chainOf fail), then every other .meta naming a head, every other
// .meta, the remaining images and our files, and volume.meta last (while
// it names a head whose .meta is gone, Longhorn cannot recover another
// head from the file names). move is false for files that are not worth
// keeping for an incremental copy (counters, temporary files).
func topLevelOrder(target string) (names []string, move map[string]bool, err error) {
	ents, err := os.ReadDir(target)
	if err != nil {
		return nil, nil, err
	}
	var first, heads, metas, rest []string
	move = map[string]bool{}
	vm, verr := ReadVolumeMeta(target)
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() {
			// Not ours (the staging directory included); a directory named
			// *.meta makes Longhorn's readMetadata fail anyway.
			continue
		}
		tmp, isTmp := strings.CutSuffix(n, ".tmp")
		switch {
		case n == VolumeMetaFile:
		case verr == nil && n == MetaName(vm.Head):
			first, move[n] = append(first, n), true
		case strings.HasSuffix(n, metaSuffix) && strings.Contains(n, "volume-head"):
			heads, move[n] = append(heads, n), true
		case strings.HasSuffix(n, metaSuffix):
			metas, move[n] = append(metas, n), isChainFile(n)
		case isChainFile(n):
			rest, move[n] = append(rest, n), true
		case n == RevisionCounterFile || n == HeaderFile || n == LiveCounterFile ||
			strings.HasPrefix(n, ".rebuild-") || // an older version's staging files
			strings.HasSuffix(n, ".tcpsync.new") || strings.HasSuffix(n, ".tcpsync-tmp") ||
			isTmp && (isChainFile(tmp) || tmp == VolumeMetaFile || tmp == HeaderFile || tmp == RevisionCounterFile):
			rest = append(rest, n)
		}
	}
	names = slices.Concat(first, heads, metas, rest)
	if _, err := os.Lstat(filepath.Join(target, VolumeMetaFile)); err == nil {
		names = append(names, VolumeMetaFile)
	}
	return names, move, nil
}

// Demote empties the target's top level of replica files: images and .meta
// are moved into the staging directory (an incremental copy then writes
// only what differs from them), the rest is removed, in topLevelOrder. The
// first step makes an older copy unadoptable; it is made durable before
// the rest.
func (s *Stage) Demote() error {
	target, stage := s.target, s.dir
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return err
	}
	names, move, err := topLevelOrder(target)
	if err != nil {
		return err
	}
	for i, n := range names {
		p := filepath.Join(target, n)
		if move[n] {
			err = os.Rename(p, filepath.Join(stage, n))
		} else {
			err = os.Remove(p)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if i == 0 {
			if err := syncDir(target); err != nil {
				return err
			}
		}
		if err := s.injected("demote", n); err != nil {
			return err
		}
	}
	if err := syncDir(stage); err != nil {
		return err
	}
	return syncDir(target)
}

// removeTopLevel removes target's replica files in topLevelOrder: what a
// failed rebuild leaves at the top level when it had not committed.
func removeTopLevel(target string) error {
	names, _, err := topLevelOrder(target)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := os.Remove(filepath.Join(target, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return syncDir(target)
}

// Publish moves a finished copy from the staging directory to target's
// top level and removes the staging directory. files are the image and
// .meta names copied; the staging directory also holds volume.meta (not
// marked Rebuilding) and the counter files. Everything is already synced.
//
//	rename revision.counter, replica.hdr, volume.meta
//	rename every image and .meta but the head's .meta, the head image last
//	fsync target
//	rename the head's .meta                      <- the commit
//	fsync target; remove the staging directory
//
// Until the commit Longhorn finds no head .meta (its Chain fails, or it
// finds no disk at all) and our chainOf returns ErrRebuilding
// (pendingRebuild). A kill at any point is repaired by the next rebuild:
// demote moves the published files back into the staging directory.
func (s *Stage) Publish(files []string) error {
	target, stage := s.target, s.dir
	vm, err := ReadVolumeMeta(stage)
	if err != nil {
		return err
	}
	if vm.Rebuilding {
		return fmt.Errorf("%s: %w: staged copy is not finished", stage, ErrRebuilding)
	}
	headMeta := MetaName(vm.Head)
	if !slices.Contains(files, vm.Head) || !slices.Contains(files, headMeta) {
		return fmt.Errorf("%s: %w: the head %s is not among the copied files", stage, ErrCorrupt, vm.Head)
	}
	var order []string
	for _, n := range []string{RevisionCounterFile, HeaderFile} {
		if _, err := os.Lstat(filepath.Join(stage, n)); err == nil {
			order = append(order, n)
		}
	}
	order = append(order, VolumeMetaFile)
	for _, n := range files {
		if n != vm.Head && n != headMeta {
			order = append(order, n)
		}
	}
	order = append(order, vm.Head)
	for _, n := range order {
		if err := os.Rename(filepath.Join(stage, n), filepath.Join(target, n)); err != nil {
			return err
		}
		if err := s.injected("publish", n); err != nil {
			return err
		}
	}
	if err := syncDir(target); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(stage, headMeta), filepath.Join(target, headMeta)); err != nil {
		return err
	}
	if err := syncDir(target); err != nil {
		return err
	}
	// Committed: the copy is complete, a failure from here on is not the
	// copy's (tests stop the process here; the hook's error is ignored).
	_ = s.injected("committed", headMeta)
	if err := os.RemoveAll(stage); err != nil {
		return err
	}
	return syncDir(target)
}

// Purge removes what a failed rebuild leaves in the target, so that no
// tool takes it for a replica: Longhorn opens a directory whatever its
// Rebuilding flag says, and re-creates a missing volume.meta from the
// first entry whose name contains volume-head (replica.go
// tryRecoverVolumeMetaFile). The staging directory goes; the top level
// goes too unless it holds a committed replica (the rebuild failed before
// it demoted an older copy, or after its commit). The top level is
// removed in topLevelOrder, so an interrupted purge leaves nothing
// adoptable either.
func (s *Stage) Purge() error { return purgeFailed(s.target) }

// purgeFailed is Stage.Purge for target.
func purgeFailed(target string) error {
	if !committed(target) {
		if err := removeTopLevel(target); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(stagingPath(target)); err != nil {
		return err
	}
	return syncDir(target)
}

// markRebuilding writes dir/volume.meta as the source's with Rebuilding
// set: from here on the target does not open until finish.
func markRebuilding(target string, vm VolumeMeta) error {
	vm.Rebuilding, vm.Dirty = true, false
	return writeJSONAtomic(target, VolumeMetaFile, vm)
}

// Clean deletes from the staging directory everything but the
// files to copy (keep) and their tcpsync resume records: the chain files
// of an older copy that the source does not have, the counter files and
// volume.meta (finish writes them anew), and the temporary files a killed
// rebuild may have left.
func (s *Stage) Clean(keep []string) error {
	stage := s.dir
	ents, err := os.ReadDir(stage)
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if slices.Contains(keep, strings.TrimSuffix(n, ".tcpsync")) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(stage, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// SourceCounters are a source replica's counter files (revision.counter,
// replica.hdr, live.counter) as a rebuild reads them, for Stage.Finish.
type SourceCounters struct {
	name string // the source, for errors
	cf   counterFiles
	ids  []fileIdent // the source's chain images; nil when not known
}

// ReadSourceCounters reads the counter files of the replica directory dir
// whose live chain (head first) is chain, and identifies the chain's
// images, as Open would.
func ReadSourceCounters(dir string, chain []string) (SourceCounters, error) {
	cf, ids, err := readCounters(dir, chain)
	if err != nil {
		return SourceCounters{}, err
	}
	return SourceCounters{name: dir, cf: cf, ids: ids}, nil
}

// ParseSourceCounters takes the contents of a source's replica.hdr,
// revision.counter and live.counter (nil: missing) read from elsewhere
// (over the network): the images' identities are not known there, so
// only the counter files' own consistency tells a leftover header. name
// names the source in errors.
func ParseSourceCounters(name string, hdr, rc, live []byte) SourceCounters {
	return SourceCounters{name: name, cf: counterFiles{hdr: hdr, rc: rc, live: live}}
}

// Finish gives the staged copy the source's counter state and a
// volume.meta (vm, the source's) not marked Rebuilding, and returns that
// counter mode and count. Every data file is already copied, verified and
// synced; Publish then moves the copy to the target. The source's
// counters are judged as Open would.
func (s *Stage) Finish(vm VolumeMeta, src SourceCounters) (CounterMode, int64, error) {
	target := s.dir
	boot, err := currentBootID()
	if err != nil {
		return 0, 0, err
	}
	cs, err := src.cf.judge(src.name, src.ids, boot)
	if err != nil {
		return 0, 0, err
	}
	if cs.rcErr != nil {
		return 0, 0, cs.rcErr
	}
	mode, h, haveHdr, rev := cs.mode, cs.hdr, cs.haveHdr, cs.total()
	head, err := identOf(filepath.Join(target, vm.Head))
	if err != nil {
		return 0, 0, err
	}
	if err := syncDir(target); err != nil {
		return 0, 0, err
	}
	if mode.Enabled() {
		if err := writeFileAtomic(target, RevisionCounterFile, FormatRevisionCounter(rev)); err != nil {
			return 0, 0, err
		}
	} else if err := os.Remove(filepath.Join(target, RevisionCounterFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, 0, err
	}
	if haveHdr {
		// Same volume, mode and epoch as the source; a replica id of its
		// own; the source's count, persisted as at a clean close.
		nh := header{gen: 1, mode: mode, clean: true, epoch: h.epoch, writeSeq: uint64(rev), rcSeq: uint64(rev),
			volumeID: h.volumeID, replicaID: newID(), bootID: boot, head: head}
		b := make([]byte, headerFileSize)
		nh.encode(b[:headerSlotSize])
		if err := writeFileAtomic(target, HeaderFile, b); err != nil {
			return 0, 0, err
		}
	} else if err := os.Remove(filepath.Join(target, HeaderFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, 0, err
	}
	vm.Rebuilding, vm.Dirty = false, false
	if err := writeJSONAtomic(target, VolumeMetaFile, vm); err != nil {
		return 0, 0, err
	}
	return mode, rev, nil
}
