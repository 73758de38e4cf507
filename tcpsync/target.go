package tcpsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/kcopy"
	"github.com/sparsesync/sparsesync/internal/rawfd"
	wtarget "github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/sparse"
)

const (
	sidecarSuffix = ".tcpsync"
	tmpSuffix     = ".tcpsync-tmp"
)

// sidecar records a target's sync state next to it.
type sidecar struct {
	Version   int    `json:"version"`
	State     string `json:"state"` // "incomplete" or "complete"
	Identity  string `json:"identity"`
	Size      int64  `json:"size"`
	BlockSize int64  `json:"block_size"`
	// Done: every source block below it is written, durable and verified.
	Done int64 `json:"done"`
	// Target identity when the sidecar was written (at every checkpoint
	// and when complete): the quick check and a resume require it
	// unchanged, so a target changed behind the receiver's back since is
	// compared in full.
	TargetDev   uint64 `json:"target_dev,omitempty"`
	TargetIno   uint64 `json:"target_ino,omitempty"`
	TargetCtime int64  `json:"target_ctime,omitempty"`
	TargetSize  int64  `json:"target_size,omitempty"`
}

const (
	stateIncomplete = "incomplete"
	stateComplete   = "complete"
)

// target is the file a receiver writes, locked for the session. The writes,
// holes, size, syncs and the atomic temporary file go through
// internal/target; what stays here is tcpsync's own: the jail (every name
// is opened inside root, never following a final symlink), the per-target
// lock, the old version an atomic sync is a delta against, and the sidecar.
type target struct {
	w       *wtarget.File // what is written (the temporary file with atomic)
	final   *os.File      // the named target (w.OS() unless atomic; nil if none)
	root    *os.Root
	ownRoot bool   // opened for this target (a pulling client): close closes it
	rel     string // the target's name within root
	display string
	// tmpLock holds the flock on the atomic temporary file (its own open
	// file description, taken before the name is handed to internal/target).
	tmpLock *os.File
	// marked: a sidecar was written by this session (the target is then
	// known as incomplete, never mistaken for a complete empty file).
	marked bool
}

// openLocalTarget opens the client's own file dst (the user names the
// path): the jail is dst's directory, so dst itself must not be a symlink
// and the sidecar and temporary file live next to it. faults (tests only)
// fails chosen writes of the target and its sidecar.
func openLocalTarget(dst string, atomic bool, faults *wtarget.Faults) (*target, error) {
	dir, base := filepath.Split(dst)
	if base == "" || base == "." || base == ".." {
		return nil, fmt.Errorf("%w: %s is a directory", ErrNotRegular, dst)
	}
	if dir == "" {
		dir = "."
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, pathErr(dst, err)
	}
	t, err := openTarget(root, base, dst, atomic, faults)
	if err != nil {
		root.Close()
		return nil, err
	}
	t.ownRoot = true
	return t, nil
}

// openTarget opens (creating if needed) rel in root for writing, refusing
// symlinks, non-regular files and hard-linked files, and takes an exclusive
// flock so two sessions never write one target. Leftover temporary files of
// killed sessions for the same name are removed once the lock is held.
// faults (tests only) fails chosen writes of the target and its sidecar.
func openTarget(root *os.Root, rel, display string, atomic bool, faults *wtarget.Faults) (*target, error) {
	t := &target{root: root, rel: rel, display: display}
	if !atomic {
		w, err := wtarget.Create(rel, &wtarget.Options{Root: root, Mode: 0o644, Faults: faults})
		if err != nil {
			return nil, pathErr(display, err)
		}
		if err := singleLink(w.OS(), display); err != nil {
			w.Close()
			return nil, err
		}
		if err := flock(w.OS()); err != nil {
			w.Close()
			return nil, fmt.Errorf("%w: %s is being written by another session", ErrBusy, display)
		}
		t.w, t.final = w, w.OS()
		t.removeStale()
		return t, nil
	}
	// Atomic: lock the old version (if any), then create the temporary
	// file under a fresh unpredictable name.
	f, err := wtarget.OpenNoFollow(root, rel, os.O_RDWR, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, pathErr(display, err)
	default:
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", display, err)
		}
		if !st.Mode().IsRegular() {
			f.Close()
			return nil, fmt.Errorf("%w: %s is a %s", ErrNotRegular, display, sparse.TypeName(st.Mode()))
		}
		if err := singleLink(f, display); err != nil {
			f.Close()
			return nil, err
		}
		if err := flock(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("%w: %s is being written by another session", ErrBusy, display)
		}
		t.final = f
	}
	if err := t.createTemp(); err != nil {
		if t.final != nil {
			t.final.Close()
		}
		return nil, err
	}
	t.w.SetFaults(faults)
	t.removeStale()
	return t, nil
}

// atomic reports whether the target is still an uncommitted temporary file.
func (t *target) atomic() bool { return t.w.TempName() != "" }

// unlock releases the session's lock early (after the final sync), so the
// next session of a client that got its answer does not find it busy.
func (t *target) unlock() {
	for _, f := range []*os.File{t.w.OS(), t.final, t.tmpLock} {
		if f == nil {
			continue
		}
		_ = rawfd.Do(f, func(fd int) error { return unix.Flock(fd, unix.LOCK_UN) })
	}
}

func flock(f *os.File) error {
	return rawfd.Do(f, func(fd int) error { return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) })
}

func pathErr(display string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s: %w", ErrNotFound, display, err)
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV), errors.Is(wtarget.RootErr(err), wtarget.ErrOutsideRoot):
		return fmt.Errorf("%w: %s: %w", ErrPathOutsideRoot, display, err)
	case errors.Is(err, unix.EISDIR), errors.Is(err, wtarget.ErrNotTarget):
		return fmt.Errorf("%w: %s: %w", ErrNotRegular, display, err)
	}
	return fmt.Errorf("%s: %w", display, err)
}

// seedTemp fills the atomic temporary file with the target's current
// contents (data extents only, through internal/kcopy: in the kernel, a
// reflink on XFS and btrfs, where it can; else read/write), so the delta
// applies to it. A kernel copy that fails after it has copied data is an
// error, never a silent fallback. The copy is charged to m's read and
// write budgets, in pieces of them when they are limited, like every
// other byte the session reads or writes (a reflink is charged too: the
// kernel does not say whether it shared the blocks or copied them).
func (t *target) seedTemp(ctx context.Context, m sparse.Map, mt *meter) error {
	if !t.atomic() || t.final == nil {
		return nil
	}
	if err := t.w.SetSize(m.Size()); err != nil {
		return fmt.Errorf("%s: %w", t.display, err)
	}
	return t.seedExtents(ctx, m.Extents(), mt)
}

// seedExtents copies the target's extents ext into the atomic temporary
// file (seedTemp; a windowed session seeds each window as it comes).
func (t *target) seedExtents(ctx context.Context, ext []sparse.Extent, mt *meter) error {
	if !t.atomic() || t.final == nil {
		return nil
	}
	for _, e := range ext {
		for off, end := e.Off, e.Off+e.Len; off < end; {
			n := end - off
			if p := mt.budget().Read.Piece(); p > 0 {
				n = min(n, p)
			}
			n = mt.writePiece(n)
			if err := mt.read(n); err != nil {
				return err
			}
			if err := mt.write(n); err != nil {
				return err
			}
			if _, _, err := kcopy.Copy(ctx, t.final, t.w, off, n, nil); err != nil {
				return fmt.Errorf("seeding %s: %w", t.display, err)
			}
			off += n
		}
	}
	return nil
}

// sync makes what is written so far durable (fdatasync).
func (t *target) sync() error {
	if err := t.w.Sync(); err != nil {
		return fmt.Errorf("%s: %w", t.display, err)
	}
	return nil
}

// commit makes a verified target durable and final: fdatasync in place;
// with atomic, fsync the temporary file, rename it over the target and
// fsync the directory. The file stays open (and locked) for the sidecar's
// stamp.
func (t *target) commit() error {
	atomic := t.atomic()
	if err := t.w.Publish(true); err != nil {
		if atomic {
			return fmt.Errorf("renaming over %s: %w", t.display, err)
		}
		return fmt.Errorf("%s: %w", t.display, err)
	}
	if atomic {
		if t.final != nil {
			t.final.Close()
		}
		t.final = t.w.OS()
	}
	return nil
}

// discard drops an uncommitted temporary file (a quick check found nothing
// to do); the old version stays open and locked.
func (t *target) discard() {
	if t.atomic() {
		_ = t.w.Abort()
	}
}

// close releases the target; an uncommitted temporary file is removed, a
// target written in place stays (with its sidecar, for a resume), unless
// this session created it and never marked it: an OPEN followed by a
// disconnect leaves no empty file behind.
func (t *target) close() {
	switch {
	case t.atomic():
		_ = t.w.Abort()
	case t.w.Created() && !t.marked:
		// Unlink while still holding the lock, so no other session can
		// have adopted the file.
		t.removeIfSame(t.rel, t.w.OS())
		_ = t.w.Close()
	default:
		_ = t.w.Close()
	}
	if t.final != nil && t.final != t.w.OS() {
		t.final.Close()
	}
	if t.tmpLock != nil {
		t.tmpLock.Close()
	}
	if t.ownRoot {
		t.root.Close()
	}
}

func (t *target) sidecarName() string { return t.rel + sidecarSuffix }

// loadSidecar reads the sidecar; nil when there is none or it is unusable.
// A sidecar name that is a hard link is refused (its contents may belong to
// a file outside the jail).
func (t *target) loadSidecar() (*sidecar, error) {
	f, err := wtarget.OpenNoFollow(t.root, t.sidecarName(), os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	if err := singleLink(f, t.display+sidecarSuffix); err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, nil
	}
	var sc sidecar
	if err := json.NewDecoder(&limitedFile{f, 64 << 10}).Decode(&sc); err != nil || sc.Version != 1 {
		return nil, nil
	}
	return &sc, nil
}

type limitedFile struct {
	f *os.File
	n int
}

func (l *limitedFile) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("sidecar too large")
	}
	b = b[:min(len(b), l.n)]
	n, err := l.f.Read(b)
	l.n -= n
	return n, err
}

// saveSidecar writes the sidecar through a fresh temporary file (created
// with O_EXCL under an unpredictable name, so nothing planted at a name can
// be written through) and a rename.
func (t *target) saveSidecar(sc *sidecar) error {
	sc.Version = 1
	b, err := json.Marshal(sc)
	if err != nil {
		return err
	}
	f, tmp, err := t.createExcl(func(r string) string { return t.rel + "." + r + sidecarSuffix + ".new" }, 0o600)
	if err != nil {
		return fmt.Errorf("sidecar of %s: %w", t.display, err)
	}
	if err = t.w.Inject(wtarget.OpSidecarWrite, t.sidecarName()); err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = t.root.Rename(tmp, t.sidecarName())
	}
	if err != nil {
		_ = t.root.Remove(tmp)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sidecar of %s: %w", t.display, err)
	}
	t.marked = true
	return nil
}

// stamp records the target's identity (device, inode, ctime, size) in sc:
// a later session trusts sc only while the target still has it.
func (t *target) stamp(sc *sidecar) error {
	f := t.final
	if f == nil {
		f = t.w.OS()
	}
	info, err := sparse.Stat(f)
	if err != nil {
		return err
	}
	sc.TargetDev, sc.TargetIno, sc.TargetCtime, sc.TargetSize = info.Dev, info.Ino, info.ChangeTime.UnixNano(), info.Size
	return nil
}

// unchangedSince reports whether the target still is what sc recorded.
func (t *target) unchangedSince(sc *sidecar) bool {
	if t.final == nil {
		return false
	}
	info, err := sparse.Stat(t.final)
	return err == nil && sc.TargetIno != 0 && info.Dev == sc.TargetDev && info.Ino == sc.TargetIno &&
		info.ChangeTime.UnixNano() == sc.TargetCtime && info.Size == sc.TargetSize
}
