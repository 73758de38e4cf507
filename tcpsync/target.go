package tcpsync

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/sparse"
)

// dirOps is where a target, its sidecar and its temporary file live: an
// *os.Root on the server, the local filesystem on a pulling client.
type dirOps interface {
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
	Rename(oldname, newname string) error
	Remove(name string) error
}

var _ dirOps = (*os.Root)(nil)

// localDir is the client's own filesystem (the user names the path).
type localDir struct{}

func (localDir) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}
func (localDir) Rename(o, n string) error { return os.Rename(o, n) }
func (localDir) Remove(name string) error { return os.Remove(name) }

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
	// Target identity when complete (the quick check requires it unchanged).
	TargetIno   uint64 `json:"target_ino,omitempty"`
	TargetCtime int64  `json:"target_ctime,omitempty"`
	TargetSize  int64  `json:"target_size,omitempty"`
}

const (
	stateIncomplete = "incomplete"
	stateComplete   = "complete"
)

// target is the file a receiver writes, locked for the session.
type target struct {
	f       *os.File // what is written (the temporary file with atomic)
	final   *os.File // the named target (== f unless atomic)
	dir     dirOps
	rel     string // the target's name within dir
	tmp     string // with atomic: the temporary file's name
	display string
}

// openTarget opens (creating if needed) rel in dir for writing, refusing
// symlinks and non-regular files, and takes an exclusive flock so two
// sessions never write one target.
func openTarget(dir dirOps, rel, display string, atomic bool) (*target, error) {
	flags := os.O_RDWR | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !atomic {
		flags |= os.O_CREATE
	}
	f, err := dir.OpenFile(rel, flags, 0o644)
	if atomic && errors.Is(err, fs.ErrNotExist) {
		return openTemp(dir, rel, display, nil)
	}
	if err != nil {
		return nil, pathErr(display, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tcpsync: %s: %w", display, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is %s", ErrNotRegular, display, st.Mode().Type())
	}
	if err := flock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s is being written by another session", ErrBusy, display)
	}
	if atomic {
		return openTemp(dir, rel, display, f)
	}
	return &target{f: f, final: f, dir: dir, rel: rel, display: display}, nil
}

// openTemp opens the temporary file of an atomic sync (final may be nil
// when the target does not exist yet); the temporary file is locked too.
func openTemp(dir dirOps, rel, display string, final *os.File) (*target, error) {
	t := &target{final: final, dir: dir, rel: rel, display: display}
	t.tmp = path.Join(path.Dir(rel), "."+path.Base(rel)+tmpSuffix)
	tf, err := dir.OpenFile(t.tmp, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err == nil {
		if err = flock(tf); err != nil {
			tf.Close()
			err = fmt.Errorf("%w: %s is being written by another session", ErrBusy, display)
		} else if err = tf.Truncate(0); err != nil {
			tf.Close()
		}
	}
	if err != nil {
		if final != nil {
			final.Close()
		}
		return nil, pathErr(display, err)
	}
	t.f = tf
	return t, nil
}

// unlock releases the session's lock early (after the final sync), so the
// next session of a client that got its answer does not find it busy.
func (t *target) unlock() {
	for _, f := range []*os.File{t.f, t.final} {
		if f == nil {
			continue
		}
		if rc, err := f.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) { _ = unix.Flock(int(fd), unix.LOCK_UN) })
		}
	}
}

func flock(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB) }); err != nil {
		return err
	}
	return ferr
}

func pathErr(display string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s: %w", ErrNotFound, display, err)
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%w: %s: %w", ErrPathOutsideRoot, display, err)
	case errors.Is(err, unix.EISDIR):
		return fmt.Errorf("%w: %s: %w", ErrNotRegular, display, err)
	}
	if strings.Contains(err.Error(), "escapes") {
		return fmt.Errorf("%w: %s: %w", ErrPathOutsideRoot, display, err)
	}
	return fmt.Errorf("tcpsync: %s: %w", display, err)
}

// seedTemp fills the atomic temporary file with the target's current
// contents (data extents only, in the kernel: reflinks where supported), so
// the delta applies to it.
func (t *target) seedTemp(m sparse.Map) error {
	if t.tmp == "" || t.final == nil {
		return nil
	}
	if err := t.f.Truncate(m.Size()); err != nil {
		return fmt.Errorf("tcpsync: %s: %w", t.display, err)
	}
	for _, e := range m.Extents() {
		off, end := e.Off, e.End()
		for off < end {
			in, out := off, off
			n, err := unix.CopyFileRange(int(t.final.Fd()), &in, int(t.f.Fd()), &out, int(min(end-off, 1<<30)), 0)
			if err != nil || n == 0 {
				// Fall back to a plain copy of the rest of the extent.
				if err := copyRange(t.final, t.f, off, end-off); err != nil {
					return fmt.Errorf("tcpsync: seeding %s: %w", t.display, err)
				}
				break
			}
			off += int64(n)
		}
	}
	return nil
}

func copyRange(src, dst *os.File, off, n int64) error {
	buf := make([]byte, min(n, 1<<20))
	for n > 0 {
		c := min(n, int64(len(buf)))
		if _, err := src.ReadAt(buf[:c], off); err != nil {
			return err
		}
		if _, err := dst.WriteAt(buf[:c], off); err != nil {
			return err
		}
		off += c
		n -= c
	}
	return nil
}

func (t *target) sync() error {
	if err := unix.Fdatasync(int(t.f.Fd())); err != nil {
		return &fs.PathError{Op: "fdatasync", Path: t.display, Err: err}
	}
	return nil
}

// commit renames the temporary file over the target (atomic mode).
func (t *target) commit() error {
	if t.tmp == "" {
		return nil
	}
	if err := t.dir.Rename(t.tmp, t.rel); err != nil {
		return fmt.Errorf("tcpsync: renaming over %s: %w", t.display, err)
	}
	t.tmp = ""
	if t.final != nil {
		t.final.Close()
	}
	t.final = t.f
	return nil
}

// close releases the target; an uncommitted temporary file is removed.
func (t *target) close() {
	if t.tmp != "" {
		_ = t.dir.Remove(t.tmp)
	}
	if t.f != t.final {
		t.f.Close()
	}
	if t.final != nil {
		t.final.Close()
	}
}

func (t *target) sidecarName() string { return t.rel + sidecarSuffix }

func (t *target) loadSidecar() *sidecar {
	f, err := t.dir.OpenFile(t.sidecarName(), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	var sc sidecar
	if err := json.NewDecoder(&limitedFile{f, 64 << 10}).Decode(&sc); err != nil || sc.Version != 1 {
		return nil
	}
	return &sc
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

// saveSidecar writes the sidecar through a temporary file and a rename.
func (t *target) saveSidecar(sc *sidecar) error {
	sc.Version = 1
	b, err := json.Marshal(sc)
	if err != nil {
		return err
	}
	tmp := t.sidecarName() + ".new"
	f, err := t.dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("tcpsync: sidecar of %s: %w", t.display, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = t.dir.Rename(tmp, t.sidecarName())
	}
	if err != nil {
		_ = t.dir.Remove(tmp)
		return fmt.Errorf("tcpsync: sidecar of %s: %w", t.display, err)
	}
	return nil
}

// stamp fills the target identity of a complete sidecar.
func (t *target) stamp(sc *sidecar) error {
	info, err := sparse.Stat(t.final)
	if err != nil {
		return err
	}
	sc.TargetIno, sc.TargetCtime, sc.TargetSize = info.Ino, info.ChangeTime.UnixNano(), info.Size
	return nil
}

// unchangedSince reports whether the target still is what sc recorded.
func (t *target) unchangedSince(sc *sidecar) bool {
	if t.final == nil {
		return false
	}
	info, err := sparse.Stat(t.final)
	return err == nil && info.Ino == sc.TargetIno && info.ChangeTime.UnixNano() == sc.TargetCtime && info.Size == sc.TargetSize
}
