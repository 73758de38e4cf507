package replica

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// A replica directory can outlive the replica in it: Longhorn's Delete
// (longhorn-engine pkg/replica/replica.go Delete) removes the images, their
// .meta files, volume.meta and revision.counter, but not replica.hdr and
// live.counter, which it does not know; a new replica created there later
// (replica.go construct; with the counter on, revision_counter.go
// initRevisionCounter starts revision.counter at 0; with it off, the file
// never appears) finds our files of the old one. And Longhorn may write
// into a directory of ours, counting in revision.counter only. The rules
// below decide what a directory's counter files say; Open, Inspect, Check
// and Rebuild all use them.

// counterFiles are a directory's counter files as read: replica.hdr,
// revision.counter and live.counter, each nil when absent.
type counterFiles struct {
	hdr, rc, live []byte
}

// readCounters reads dir's counter files and identifies the images of its
// chain: what judge needs.
func readCounters(dir string, chain []string) (counterFiles, []fileIdent, error) {
	cf, err := readCounterFiles(dir)
	if err != nil {
		return cf, nil, err
	}
	ids, err := chainIdents(dir, chain)
	return cf, ids, err
}

// readCounterFiles reads dir's counter files.
func readCounterFiles(dir string) (counterFiles, error) {
	var cf counterFiles
	for _, f := range []struct {
		name string
		dst  *[]byte
	}{{HeaderFile, &cf.hdr}, {RevisionCounterFile, &cf.rc}, {LiveCounterFile, &cf.live}} {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err == nil {
			*f.dst = b
		} else if !errors.Is(err, fs.ErrNotExist) {
			return cf, err
		}
	}
	return cf, nil
}

// chainIdents identifies the images of a chain (see fileIdent).
func chainIdents(dir string, chain []string) ([]fileIdent, error) {
	ids := make([]fileIdent, 0, len(chain))
	for _, img := range chain {
		id, err := identOf(filepath.Join(dir, img))
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// counterState is what a directory's counter files say.
type counterState struct {
	mode CounterMode
	// hdr is replica.hdr when it belongs to the replica now in the
	// directory (haveHdr); ignored says why a replica.hdr present was
	// not believed.
	hdr     header
	slot    int // replica.hdr's slot holding hdr
	haveHdr bool
	ignored string
	// own is the count of the replica's writes as we know them: the
	// highest of replica.hdr, a live.counter of this boot and, unless
	// foreign says otherwise, revision.counter (Longhorn's only count).
	own int64
	// foreign > 0: our header is unclean (our writer did not close) and
	// revision.counter is past the count we last wrote into it, so
	// another writer (Longhorn) added at least foreign writes on top of a
	// count that revision.counter never held: how the two interleave with
	// a sibling's writes cannot be told from counts.
	foreign int64
	// lastRC is the count we last wrote into revision.counter.
	lastRC uint64
	live   liveState // trusted: this boot, this replica
	// rcErr: the counter is on but revision.counter cannot be parsed.
	rcErr error
}

// total is the count the replica's writes reach at least: its own and the
// foreign ones.
func (s counterState) total() int64 { return s.own + s.foreign }

// leftoverReason says why header h does not belong to the replica now in
// the directory, or "" if it may. chain identifies the chain's images (nil
// when unknown: a remote source). rc is revision.counter's content (nil:
// absent).
//
// A version-2 header names the head it was written with; the hard link
// that makes a head a snapshot keeps that file in the chain, while a
// re-created replica has only new files. A header is also a leftover when
// the counter files contradict it: it records the counter on and
// revision.counter is gone (Delete removes it; a counter-off replica never
// creates it), it records the counter off and revision.counter exists (our
// counter-off writer never writes one), or it is clean and ahead of
// revision.counter (our clean close writes revision.counter first, with
// the same count; Longhorn only raises it). Only a header whose head is
// found by inode and birth time vouches for itself when revision.counter
// is missing: that is damage (judge reports it), not a new replica.
func leftoverReason(h header, chain []fileIdent, rc []byte) string {
	vouched := false
	if h.version >= 2 && chain != nil {
		if !slices.Contains(chain, h.head) {
			return fmt.Sprintf("its head image (inode %d) is not in the chain: it was written for an earlier replica in this directory", h.head.ino)
		}
		// Without a birth time the inode number alone may have been
		// reused by a new replica's head.
		vouched = h.head.btime != 0
	}
	switch {
	case h.mode.Enabled() && rc == nil && !vouched:
		return fmt.Sprintf("it records the revision counter %s but %s is missing: a replica without the counter was created here since", h.mode, RevisionCounterFile)
	case !h.mode.Enabled() && rc != nil:
		return fmt.Sprintf("it records the revision counter off but %s exists: a replica with the counter on was created here since", RevisionCounterFile)
	}
	n, err := ParseRevisionCounter(rc)
	switch {
	case err != nil:
	case h.clean && n < int64(h.writeSeq):
		return fmt.Sprintf("its clean count %d is ahead of %s (%d): the replica was re-created here since", h.writeSeq, RevisionCounterFile, n)
	case !vouched && h.mode.Enabled() && n < int64(h.rcSeq):
		// We write revision.counter before each header that records
		// what we wrote; only a power loss (the file is not synced
		// before a clean close) or a new replica takes it lower. Taken
		// for a new replica: its count is then the lower one, which at
		// worst has a healthy replica rebuilt.
		return fmt.Sprintf("%s (%d) is below the %d we last wrote into it: the replica was re-created here since", RevisionCounterFile, n, h.rcSeq)
	}
	return ""
}

// judge decides what the counter files say (see counterState). dir names
// the files in errors; chain is as for leftoverReason; boot is this boot's
// id. It fails only on a replica.hdr that cannot be decoded.
func (c counterFiles) judge(dir string, chain []fileIdent, boot ID) (counterState, error) {
	var s counterState
	if c.hdr != nil {
		h, slot, err := decodeHeader(c.hdr)
		if err != nil {
			return s, corruptf(filepath.Join(dir, HeaderFile), "%v", err)
		}
		if s.ignored = leftoverReason(h, chain, c.rc); s.ignored == "" {
			s.hdr, s.slot, s.haveHdr = h, slot, true
		}
	}
	switch {
	case s.haveHdr:
		s.mode = s.hdr.mode
	case c.rc != nil:
		s.mode = CounterOn
	default:
		// Longhorn with --disableRevCounter (its default since 1.7)
		// never creates revision.counter (construct skips
		// initRevisionCounter).
		s.mode = CounterOff
	}
	if !s.mode.Enabled() {
		return s, nil
	}
	if c.rc == nil {
		s.rcErr = corruptf(filepath.Join(dir, RevisionCounterFile), "missing, though %s (of this replica) records the counter %s", HeaderFile, s.mode)
		return s, nil
	}
	rc, err := ParseRevisionCounter(c.rc)
	if err != nil {
		s.rcErr = corruptf(filepath.Join(dir, RevisionCounterFile), "%v", err)
		return s, nil
	}
	if !s.haveHdr {
		s.own = rc
		return s, nil
	}
	h := s.hdr
	own, last := h.writeSeq, h.rcSeq
	if c.live != nil {
		if ls, err := decodeLive(c.live); err == nil && ls.bootID == boot && ls.replicaID == h.replicaID {
			s.live = ls
			own, last = max(own, ls.count), max(last, ls.rcLast)
		}
	}
	s.own, s.lastRC = int64(own), last
	switch {
	case !h.clean && h.version >= 2 && rc > int64(last):
		s.foreign = rc - int64(last)
	case rc > int64(own):
		// After our clean close revision.counter held exactly our count,
		// so Longhorn's writes since are its count's rise: the count is
		// revision.counter's. (A version-1 header does not say what we
		// last wrote into revision.counter: the higher count is
		// believed, as before version 2.)
		s.own = rc
	}
	return s, nil
}
