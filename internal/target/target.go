package target

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sparsesync/sparsesync/sparse"
)

// Options say how Create opens the destination.
type Options struct {
	// Atomic writes to a temporary file in the destination's directory and
	// renames it over the destination in Commit. Ignored for block devices,
	// which are always written in place.
	Atomic bool
	// Mode is the permission bits a new file gets (exactly, not masked by the
	// umask). Zero means 0o600: a destination is never created with mode 0000.
	Mode fs.FileMode
	// Truncate empties an existing regular destination when it is opened
	// (in place), so the caller can treat it as new.
	Truncate bool
	// Root confines the destination to a directory: the path given to
	// Create is a slash-separated name inside Root, resolved by os.Root (it
	// can never leave Root), its last component is never followed if it is
	// a symlink (O_NOFOLLOW), and only regular files are accepted, checked
	// on the opened descriptor. The temporary file, the rename and the
	// directory sync of atomic mode happen inside Root too.
	Root *os.Root
	// TempName is the temporary file's name in atomic mode (in the same
	// namespace as the destination: a path, or a name inside Root) instead
	// of a fresh unique one. A leftover file of that name is reused as it is
	// (opened without following symlinks, never truncated by Create): a
	// caller that serialises sessions on it locks it first, then calls
	// SetSize(0).
	TempName string
	// Faults, for tests, fails chosen operations of the File (see Faults).
	Faults *Faults
}

// File is an open destination. See the package documentation for the
// concurrency rules.
type File struct {
	f       *os.File
	root    *os.Root // names are inside root (Options.Root), else paths
	path    string   // the destination's name
	tmp     string   // the temporary file in atomic mode, else ""
	created bool     // Create made the file (in place): Abort removes it
	device  bool
	devSize int64
	size    int64
	done    atomic.Bool
	faults  *Faults
	// alloc caches whether this file's filesystem is ext4 (onExt4):
	// 0 not asked yet, allocYes, allocNo.
	alloc atomic.Int32

	// For Ungrow: the file's size before SetSize first grew it (valid if
	// grew), and the end of the furthest write since.
	grew     bool
	grewFrom int64
	wroteEnd atomic.Int64
}

// Create opens path for writing: an existing block device in place, an
// existing regular file in place (or, in atomic mode, a new temporary file
// next to it), or a new regular file. It refuses directories and other
// special files with ErrNotTarget, before writing anything. With
// Options.Root, path is a name inside that directory and only regular files
// qualify (see Root). nil options are the defaults.
func Create(path string, o *Options) (*File, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	t, err := create(path, opts)
	if err == nil {
		t.faults = opts.Faults
	}
	return t, err
}

func create(path string, o Options) (*File, error) {
	perm := o.Mode.Perm()
	if perm == 0 {
		perm = 0o600
	}
	if o.Root != nil {
		return createIn(o.Root, path, perm, o)
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && st.Mode().IsDir():
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("is a directory: %w", ErrNotTarget)}
	case err == nil && st.Mode()&fs.ModeDevice != 0 && st.Mode()&fs.ModeCharDevice == 0:
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return nil, err
		}
		return fromFile(f, path, true)
	case err == nil && !st.Mode().IsRegular():
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%s: %w", sparse.TypeName(st.Mode()), ErrNotTarget)}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	exists := err == nil
	if o.Atomic && o.TempName != "" {
		f, err := OpenNoFollow(nil, o.TempName, os.O_RDWR|os.O_CREATE, perm)
		if err != nil {
			return nil, err
		}
		return adoptTemp(nil, f, path, o.TempName, perm, false)
	}
	if o.Atomic {
		f, tmp, err := createTemp(path, perm)
		if err != nil {
			return nil, tempError("create temporary copy of", path, err)
		}
		return &File{f: f, path: path, tmp: tmp}, nil
	}
	flag := os.O_RDWR | os.O_CREATE
	if o.Truncate {
		flag |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	t, err := fromFile(f, path, true)
	if err != nil {
		return nil, err
	}
	if !exists {
		t.created = true
		if err := f.Chmod(perm); err != nil {
			t.Abort()
			return nil, err
		}
	}
	return t, nil
}

// createIn is Create inside root: regular files only, the last component
// never followed, every check made on the opened descriptor.
func createIn(root *os.Root, name string, perm fs.FileMode, o Options) (*File, error) {
	if o.Atomic {
		// The destination is only replaced by name at the end; refuse
		// what a rename cannot or must not replace before writing.
		if st, err := root.Lstat(name); err == nil && !st.Mode().IsRegular() {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%s: %w", sparse.TypeName(st.Mode()), ErrNotTarget)}
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, RootErr(err)
		}
		tmp := o.TempName
		var f *os.File
		var err error
		if tmp != "" {
			f, err = OpenNoFollow(root, tmp, os.O_RDWR|os.O_CREATE, perm)
		} else {
			dir, base := path.Split(name)
			for i := 0; ; i++ {
				tmp = dir + "." + base + ".sparsesync-" + strconv.FormatInt(time.Now().UnixNano()+int64(i), 36)
				f, err = OpenNoFollow(root, tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
				if !errors.Is(err, fs.ErrExist) || i >= 100 {
					break
				}
			}
		}
		if err != nil {
			return nil, tempError("create temporary copy of", name, err)
		}
		return adoptTemp(root, f, name, tmp, perm, o.TempName == "")
	}
	flag := os.O_RDWR
	if o.Truncate {
		flag |= os.O_TRUNC
	}
	created := false
	f, err := OpenNoFollow(root, name, flag, 0)
	if errors.Is(err, fs.ErrNotExist) {
		// Create it, exclusively: a name appearing meanwhile is opened as
		// an existing file on the retry rather than taken over.
		f, err = OpenNoFollow(root, name, flag|os.O_CREATE|os.O_EXCL, perm)
		created = err == nil
		if errors.Is(err, fs.ErrExist) {
			f, err = OpenNoFollow(root, name, flag, 0)
		}
	}
	if errors.Is(err, syscall.EISDIR) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("is a directory: %w", ErrNotTarget)}
	}
	if err != nil {
		return nil, err
	}
	t, err := regular(root, f, name)
	if err != nil {
		return nil, err
	}
	if created {
		t.created = true
		if err := f.Chmod(perm); err != nil {
			t.Abort()
			return nil, err
		}
	}
	return t, nil
}

// regular wraps f (owned: closed on error) when it is a regular file.
func regular(root *os.Root, f *os.File, name string) (*File, error) {
	info, err := sparse.Stat(f)
	if err == nil && !info.Mode.IsRegular() {
		err = &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%s: %w", sparse.TypeName(info.Mode), ErrNotTarget)}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{f: f, root: root, path: name, size: info.Size}, nil
}

// adoptTemp wraps the temporary file f of an atomic Create: a regular file
// given exactly perm. On error f is closed and, when fresh (made by this
// Create, not a reused TempName), removed.
func adoptTemp(root *os.Root, f *os.File, name, tmp string, perm fs.FileMode, fresh bool) (*File, error) {
	t, err := regular(root, f, tmp)
	if err == nil {
		t.path, t.tmp = name, tmp
		if err = f.Chmod(perm); err != nil {
			f.Close()
		}
	}
	if err != nil {
		if fresh {
			_ = removeName(root, tmp)
		}
		return nil, err
	}
	return t, nil
}

// createTemp makes an empty file with mode perm next to path.
func createTemp(path string, perm fs.FileMode) (*os.File, string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	for i := 0; ; i++ {
		name := filepath.Join(dir, "."+base+".sparsesync-"+strconv.FormatInt(time.Now().UnixNano()+int64(i), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) && i < 100 {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		if err := f.Chmod(perm); err != nil {
			f.Close()
			os.Remove(name)
			return nil, "", err
		}
		return f, name, nil
	}
}

// Open wraps a destination the caller already holds open for writing (a
// storage engine's own descriptor). The File does not own f's name: Abort
// does not remove it, and Close closes f. On error f is left open.
func Open(f *os.File) (*File, error) { return fromFile(f, f.Name(), false) }

// fromFile wraps f; with own, f is closed on error.
func fromFile(f *os.File, path string, own bool) (*File, error) {
	info, err := sparse.Stat(f)
	if err == nil && !info.Mode.IsRegular() && !info.BlockDevice {
		err = &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%s: %w", sparse.TypeName(info.Mode), ErrNotTarget)}
	}
	if err != nil {
		if own {
			f.Close()
		}
		return nil, err
	}
	t := &File{f: f, path: path, device: info.BlockDevice, size: info.Size}
	if info.BlockDevice {
		t.devSize = info.Size
	}
	return t, nil
}

// OS returns the open file, for reads, FIEMAP and fstat: every write goes
// through the File's methods (WriteAt, Zero, SetSize, Clone, CloneRange,
// CopyFileRange), so that its Faults reach it.
func (t *File) OS() *os.File { return t.f }

// Name returns the destination's name (not the temporary file's).
func (t *File) Name() string { return t.path }

// TempName returns the temporary file's name in atomic mode, else "".
func (t *File) TempName() string { return t.tmp }

// BlockDevice reports whether the destination is a block device.
func (t *File) BlockDevice() bool { return t.device }

// Created reports whether Create made a new file in place.
func (t *File) Created() bool { return t.created }

// Capacity returns how many bytes a block device holds; 0 for files.
func (t *File) Capacity() int64 { return t.devSize }

// SetSize makes the destination n bytes long: ftruncate for a file whose
// size differs (which both cuts stale bytes and, when done before writing,
// stops XFS speculative preallocation), a size check for a block device
// (ErrTooSmall).
func (t *File) SetSize(n int64) error {
	if t.done.Load() {
		return ErrClosed
	}
	if t.device {
		if n > t.devSize {
			return &fs.PathError{Op: "size", Path: t.path, Err: fmt.Errorf("%w: need %d bytes, device has %d", ErrTooSmall, n, t.devSize)}
		}
		t.size = n
		return nil
	}
	// A file that already has the size keeps it untouched: ftruncate would
	// move its mtime and ctime, and an unchanged re-sync must change nothing.
	fi, err := t.f.Stat()
	if err == nil && fi.Size() == n {
		t.size = n
		return nil
	}
	if r, ok := t.faults.fire(OpTruncate, t.path); ok {
		return &fs.PathError{Op: "ftruncate", Path: t.path, Err: r.Err}
	}
	if err := t.f.Truncate(n); err != nil {
		return &fs.PathError{Op: "ftruncate", Path: t.path, Err: errors.Unwrap(err)}
	}
	if fi != nil && !t.grew && n > fi.Size() {
		t.grew, t.grewFrom = true, fi.Size()
	}
	t.size = n
	return nil
}

// Ungrow gives a file that SetSize grew its old size back, if nothing has
// been written past that size since (only holes lie there): a sync that
// fails before its data reached past the old end leaves the file no longer
// than it was. A no-op otherwise: for block devices, and after Publish.
func (t *File) Ungrow() error {
	if t.done.Load() {
		return ErrClosed
	}
	if t.device || !t.grew || t.wroteEnd.Load() > t.grewFrom {
		return nil
	}
	if err := t.f.Truncate(t.grewFrom); err != nil {
		return &fs.PathError{Op: "ftruncate", Path: t.path, Err: errors.Unwrap(err)}
	}
	t.grew, t.size = false, t.grewFrom
	return nil
}

// wrote notes that [off, end) of the file was written (for Ungrow).
func (t *File) wrote(end int64) {
	for {
		cur := t.wroteEnd.Load()
		if end <= cur || t.wroteEnd.CompareAndSwap(cur, end) {
			return
		}
	}
}

// WriteAt writes b at off (pwrite, retried until complete).
func (t *File) WriteAt(b []byte, off int64) (int, error) {
	var injected error
	if r, ok := t.faults.fire(OpWrite, t.path); ok {
		b, injected = b[:min(max(r.Short, 0), len(b))], r.Err
	}
	n, err := t.f.WriteAt(b, off)
	t.wrote(off + int64(n))
	if err == nil {
		err = injected
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return n, &fs.PathError{Op: "write", Path: t.path, Err: fmt.Errorf("at offset %d: %w", off+int64(n), err)}
	}
	return n, nil
}

// Zero makes [off, off+n) read as zeros. A file gets a hole
// (PUNCH_HOLE|KEEP_SIZE) where its filesystem can punch; a block device gets
// its logical-block-aligned middle zeroed by the kernel (fallocate on the
// device, which never leaves old contents) and the unaligned edges written.
// punched reports whether the range was deallocated rather than written.
func (t *File) Zero(off, n int64) (punched bool, err error) {
	if n <= 0 {
		return true, nil
	}
	if r, ok := t.faults.fire(OpPunch, t.path); ok {
		return false, &fs.PathError{Op: "fallocate", Path: t.path, Err: r.Err}
	}
	if !t.device {
		punched, err = sparse.PunchHole(t.f, off, n)
		if end := off + n; err == nil && punched && end >= t.size && end%4096 != 0 {
			// A range ending at end of file takes its whole last block:
			// a partial block would be zeroed but stay allocated. Only
			// once punching works: the zero-writing fallback would grow
			// the file past its end.
			from := max(off, end/4096*4096)
			_, err = sparse.PunchHole(t.f, from, (end+4095)/4096*4096-from)
		}
		return punched, err
	}
	const align = 4096
	a := (off + align - 1) / align * align
	b := (off + n) / align * align
	if b <= a {
		return false, sparse.WriteZeros(t.f, off, n)
	}
	if a > off {
		if err := sparse.WriteZeros(t.f, off, a-off); err != nil {
			return false, err
		}
	}
	punched, err = sparse.PunchHole(t.f, a, b-a)
	if err != nil {
		return false, err
	}
	if off+n > b {
		if err := sparse.WriteZeros(t.f, b, off+n-b); err != nil {
			return false, err
		}
	}
	return punched, nil
}

// Sync flushes the destination's data (fdatasync).
func (t *File) Sync() error {
	err := Fdatasync(t.f)
	if r, ok := t.faults.fire(OpFdatasync, t.path); ok && err == nil {
		err = r.Err
	}
	if err != nil {
		return &fs.PathError{Op: "fdatasync", Path: t.path, Err: err}
	}
	return nil
}

// Fsync flushes the destination's data and metadata (fsync): what a
// temporary file needs before it is read back and renamed (its size is
// metadata).
func (t *File) Fsync() error {
	err := t.f.Sync()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if r, ok := t.faults.fire(OpFsync, t.path); ok && err == nil {
		err = r.Err
	}
	if err != nil {
		return &fs.PathError{Op: "fsync", Path: t.path, Err: err}
	}
	return nil
}

// Commit finishes a complete copy: with sync, fdatasync (fsync in atomic
// mode); then, in atomic mode, rename over the destination and (with sync)
// fsync the directory. It closes the file. On error the temporary file is
// removed and the old destination is untouched; in place, a file Create
// made is removed (its data may not be durable: it must not look complete).
func (t *File) Commit(sync bool) error {
	if t.done.Swap(true) {
		return ErrClosed
	}
	err := t.flush(sync)
	if cerr := t.f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if t.tmp == "" {
		if err != nil && t.created {
			_ = removeName(t.root, t.path)
		}
		return err
	}
	if err == nil {
		if err = t.publish(sync); err == nil {
			return nil
		}
	}
	_ = removeName(t.root, t.tmp)
	return err
}

// Publish is Commit that keeps the file open: the caller may still hold a
// lock on it or look at what it published (its inode, its times), and
// closes it with Close. After Publish, Abort only closes. On error nothing
// is removed: the caller calls Abort.
func (t *File) Publish(sync bool) error {
	if t.done.Load() {
		return ErrClosed
	}
	if err := t.flush(sync); err != nil {
		return err
	}
	if t.tmp != "" {
		if err := t.publish(sync); err != nil {
			return err
		}
		t.tmp = ""
	}
	t.created, t.grew = false, false // final: Ungrow leaves it alone
	return nil
}

// flush makes the data durable before a commit: fsync for a temporary file
// (its size and metadata must survive the rename), fdatasync in place.
func (t *File) flush(sync bool) error {
	if !sync {
		return nil
	}
	if t.tmp != "" {
		err := t.f.Sync()
		if r, ok := t.faults.fire(OpFsync, t.path); ok && err == nil {
			err = r.Err
		}
		if err != nil {
			return tempError("fsync temporary copy of", t.path, err)
		}
		return nil
	}
	return t.Sync()
}

// publish renames the temporary file over the destination and, with sync,
// fsyncs their directory.
func (t *File) publish(sync bool) error {
	if r, ok := t.faults.fire(OpRename, t.path); ok {
		return tempError("rename temporary copy over", t.path, r.Err)
	}
	if t.root != nil {
		if err := t.root.Rename(t.tmp, t.path); err != nil {
			return tempError("rename temporary copy over", t.path, err)
		}
		if !sync {
			return nil
		}
		d, err := t.root.Open(path.Dir(t.path))
		if err != nil {
			return err
		}
		return syncClose(d)
	}
	if err := os.Rename(t.tmp, t.path); err != nil {
		return tempError("rename temporary copy over", t.path, err)
	}
	if sync {
		return SyncDir(filepath.Dir(t.path))
	}
	return nil
}

// tempError reports a failure on the temporary file of an atomic Create
// under the destination's name, which is the one the user gave: the
// temporary name is ours, random, and gone after the failure. The cause
// (the errno, for errors.Is) is kept.
func tempError(op, dst string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return &fs.PathError{Op: op, Path: dst, Err: err}
}

func removeName(root *os.Root, name string) error {
	if root != nil {
		return root.Remove(name)
	}
	return os.Remove(name)
}

// Abort gives up: it closes the file and removes the temporary file (atomic
// mode) or the file Create made (in place). An existing destination written
// in place is left as it is; the caller must not report it as a good copy.
func (t *File) Abort() error {
	if t.done.Swap(true) {
		return nil
	}
	err := t.f.Close()
	switch {
	case t.tmp != "":
		if rerr := removeName(t.root, t.tmp); rerr != nil && err == nil {
			err = rerr
		}
	case t.created:
		if rerr := removeName(t.root, t.path); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// Close closes the file without syncing or renaming (Open'ed files, or
// after Commit/Abort, where it does nothing).
func (t *File) Close() error {
	if t.done.Swap(true) {
		return nil
	}
	return t.f.Close()
}

// SyncDir fsyncs a directory so that creates, renames and unlinks in it
// are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return syncClose(d)
}

func syncClose(d *os.File) error {
	err := d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
