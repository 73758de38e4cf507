package localsync

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/sparse"
)

// Copy makes dst an exact copy of src: the same bytes, the same size and
// holes where src has holes. A missing or empty dst gets a full copy (one
// FICLONE where the filesystem can, else the data extents only); an existing
// dst is re-synced, writing only the blocks that differ. dst may be a block
// device, which gets src's holes zeroed. See Options (nil: the defaults)
// for atomic mode, syncing and zero detection.
//
// Before writing anything Copy refuses a source that is not a regular file
// or block device, a destination that is the source (ErrSameFile, also
// through hard links), and a device too small (ErrDestinationTooSmall). If
// the source changes during the copy it returns ErrSourceChanged. After any
// error the source is untouched, a file Copy created is removed, and in
// atomic mode the old destination is left as it was.
func Copy(ctx context.Context, src, dst string, o *Options) (Stats, error) {
	start := time.Now()
	opts := orZero(o)
	if err := opts.Validate(); err != nil {
		return Stats{}, err
	}
	opts.setDefaults()
	// O_NONBLOCK: opening a FIFO (which the walker then refuses) must not
	// wait for a writer; regular files and block devices ignore it.
	sf, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Stats{}, err
	}
	defer sf.Close()
	// The source's version, taken once its last change is in the past of
	// the filesystem clock: any write from now on changes it (checkSource).
	w, err := sparse.NewSettledWalker(ctx, sf)
	if err != nil {
		return Stats{}, err
	}
	if st, err := os.Stat(dst); err == nil {
		if sameFile(w.Info(), st) {
			return Stats{}, &fs.PathError{Op: "copy", Path: dst, Err: ErrSameFile}
		}
		// Only an existing destination can carry a mark (a new one costs
		// no second lookup).
		if qs, ok := quickCheckPath(w.Info(), dst, &opts); ok {
			qs.Elapsed = time.Since(start)
			return qs, nil
		}
	}
	dg := openDigests(dst, &opts)
	t, err := target.Create(dst, &target.Options{Atomic: opts.Atomic, Mode: w.Info().Mode.Perm(), Faults: opts.faults})
	if err != nil {
		return Stats{}, err
	}
	if t.BlockDevice() || !w.Info().Mode.IsRegular() {
		dg = nil
	}
	if t.TempName() != "" && mayClone(&opts, w) {
		// Atomic re-sync: start the temporary file as a clone of the old
		// destination, so only what differs is written. Where cloning is
		// impossible the temporary file stays empty and gets a full copy.
		if err := seedFromOld(dst, t, opts.Logger); err != nil {
			t.Abort()
			return Stats{}, err
		}
	}
	st, err := run(ctx, w, sf, t, &opts, dg)
	if err != nil {
		t.Abort()
		st.Elapsed = time.Since(start)
		return st, err
	}
	// Commit, with the file kept open until it is marked.
	if err = t.Publish(!opts.NoSync); err != nil {
		// The temporary file goes (the old destination stays), and so
		// does a destination this copy created: it may not be durable,
		// and must not look complete. An existing one is only closed.
		t.Abort()
		st.Elapsed = time.Since(start)
		return st, err
	}
	digestsID := ""
	if !t.BlockDevice() {
		digestsID = saveDigests(ctx, dst, dg, st.Size, &opts)
	}
	markSynced(ctx, w.Info(), t, st, &opts, digestsID)
	err = t.Close()
	st.Elapsed = time.Since(start)
	return st, err
}

// CopyFile is Copy over files the caller already holds: src open for
// reading, dst open for reading and writing (a regular file or block
// device). It works in place (Options.Atomic is refused) and closes neither
// file; it fdatasyncs dst at the end unless Options.NoSync.
func CopyFile(ctx context.Context, src, dst *os.File, o *Options) (Stats, error) {
	start := time.Now()
	opts := orZero(o)
	if err := opts.Validate(); err != nil {
		return Stats{}, err
	}
	if opts.Atomic {
		return Stats{}, fmt.Errorf("%w: atomic mode needs a destination path (use Copy)", ErrInvalidOptions)
	}
	opts.setDefaults()
	w, err := sparse.NewSettledWalker(ctx, src)
	if err != nil {
		return Stats{}, err
	}
	dinfo, err := sparse.Stat(dst)
	if err != nil {
		return Stats{}, err
	}
	if dinfo.Dev == w.Info().Dev && dinfo.Ino == w.Info().Ino {
		return Stats{}, &fs.PathError{Op: "copy", Path: dst.Name(), Err: ErrSameFile}
	}
	if st, ok := quickCheck(w.Info(), dst, &opts); ok {
		st.Elapsed = time.Since(start)
		return st, nil
	}
	t, err := target.Open(dst)
	if err != nil {
		return Stats{}, err
	}
	t.SetFaults(opts.faults)
	st, err := run(ctx, w, src, t, &opts, nil)
	if err == nil && !opts.NoSync {
		if err = t.Sync(); err == nil {
			markSynced(ctx, w.Info(), t, st, &opts, "")
		}
	}
	st.Elapsed = time.Since(start)
	return st, err
}

func sameFile(info sparse.FileInfo, st fs.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && uint64(sys.Dev) == info.Dev && uint64(sys.Ino) == info.Ino
}

// mayClone reports whether the options and the source allow reflinks.
func mayClone(o *Options, w *sparse.Walker) bool {
	return !o.DetectZeros && o.Reflink != ReflinkNever && (o.Method == MethodAuto || o.Method == MethodReflink) &&
		!w.Info().BlockDevice
}

// seedFromOld clones the old destination, if it is a regular file, into the
// empty temporary file of t.
func seedFromOld(dst string, t *target.File, log *slog.Logger) error {
	old, err := os.Open(dst)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer old.Close()
	if st, err := old.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		return nil
	}
	handled, err := t.Clone(old)
	if !handled {
		log.Debug("localsync: cannot clone the old destination, copying in full", "path", dst, "err", err)
		return nil
	}
	if err != nil {
		// The temporary name is ours and gone after the failure: name the
		// destination the user gave.
		return &fs.PathError{Op: "ficlone old version for", Path: t.Name(), Err: err}
	}
	return nil
}
