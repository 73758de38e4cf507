package localsync

import (
	"context"
	"os"
	"syscall"

	"github.com/sparsesync/sparsesync/internal/syncmark"
	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/sparse"
)

// The quick check: after a verified, durable copy into a regular file, the
// destination gets a mark (internal/syncmark) naming the source version it
// now holds and the destination as it was left. A later copy that finds the
// same source version and the destination unchanged since has nothing to
// do, and ends without walking or reading either file. An old mark needs no
// removal before a copy writes: any write moves the destination's mtime off
// the one it records (sparse.SettleMtime: no later write can be stamped
// with it).

// shape names the options that change what a destination holds for one
// source version (syncmark.Mark.Shape).
func shape(o *Options) string {
	if o.DetectZeros {
		return "zeros"
	}
	return ""
}

// quickCheck reports the stats of a copy that has nothing to do: dst, an
// open regular file, carries a mark of the source version src and has not
// changed since. ok is false whenever a copy must compare.
func quickCheck(src sparse.FileInfo, dst *os.File, o *Options) (Stats, bool) {
	if o.FullCompare || !src.Mode.IsRegular() {
		return Stats{}, false
	}
	dinfo, err := sparse.Stat(dst)
	if err != nil || !dinfo.Mode.IsRegular() {
		return Stats{}, false
	}
	m, ok := syncmark.Read(dst)
	if !ok || !m.Matches(src, dinfo, shape(o)) {
		return Stats{}, false
	}
	o.Logger.Debug("localsync: quick check: the destination holds this source version", "dst", dst.Name())
	return Stats{Size: src.Size, DataBytes: m.DataBytes, UnchangedBytes: m.DataBytes, QuickCheck: true}, true
}

// quickCheckPath is quickCheck for a destination named by path (Copy).
func quickCheckPath(src sparse.FileInfo, dst string, o *Options) (Stats, bool) {
	if o.FullCompare || !src.Mode.IsRegular() {
		return Stats{}, false
	}
	f, err := os.OpenFile(dst, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Stats{}, false
	}
	defer f.Close()
	return quickCheck(src, f, o)
}

// markSynced records on dst that it now holds the source version src (the
// version taken before the copy's first read and found again after its
// last), once dst is durable: nothing is marked without a sync, since after
// a crash the mark could outlive data that never reached the disk. A mark
// that cannot be written (no user extended attributes, not the owner) only
// costs the next copy its quick check.
func markSynced(ctx context.Context, src sparse.FileInfo, dst *target.File, st Stats, o *Options, digests string) {
	if o.NoSync || !src.Mode.IsRegular() || dst.BlockDevice() {
		return
	}
	m := syncmark.Mark{Source: syncmark.Version(src), Shape: shape(o), DataBytes: st.DataBytes, Digests: digests}
	if err := syncmark.Write(ctx, dst.OS(), m); err != nil {
		o.Logger.Debug("localsync: no quick-check mark, the next copy compares", "dst", dst.Name(), "err", err)
	}
}
