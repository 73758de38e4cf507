package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// LoopFS is a scratch filesystem on a loop device in direct I/O mode, made
// by MountLoop for a benchmark session.
type LoopFS struct {
	Kind string // ext4, xfs or btrfs
	Dir  string // the mount point
	// DirectIO is false when the kernel kept the loop device buffered.
	DirectIO bool
	img      string
}

// MountLoop makes a fresh filesystem of the given kind on a sparse image of
// size bytes under parent, mounts it on a loop device, switches the device
// to direct I/O (requests reach the backing disk many at a time, as a real
// disk's queue takes them) and returns it. It needs root and the mkfs tool;
// Close unmounts and deletes it.
func MountLoop(ctx context.Context, kind string, size int64, parent string) (*LoopFS, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("bench: loop filesystems need root")
	}
	var mkfs []string
	switch kind {
	case "ext4":
		mkfs = []string{"mkfs.ext4", "-q", "-F", "-E", "nodiscard,lazy_itable_init=0,lazy_journal_init=0"}
	case "xfs":
		mkfs = []string{"mkfs.xfs", "-q", "-f", "-K", "-m", "reflink=1"}
	case "btrfs":
		mkfs = []string{"mkfs.btrfs", "-q", "-f", "-K"}
	default:
		return nil, fmt.Errorf("bench: unknown filesystem kind %q (want ext4, xfs or btrfs)", kind)
	}
	if _, err := exec.LookPath(mkfs[0]); err != nil {
		return nil, fmt.Errorf("bench: %s not found: %w", mkfs[0], err)
	}
	dir, err := os.MkdirTemp(parent, "sparsesync-bench-"+kind+"-")
	if err != nil {
		return nil, err
	}
	l := &LoopFS{Kind: kind, Dir: filepath.Join(dir, "mnt"), img: filepath.Join(dir, "fs.img")}
	fail := func(err error) (*LoopFS, error) {
		_ = exec.Command("umount", l.Dir).Run()
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Mkdir(l.Dir, 0o755); err != nil {
		return fail(err)
	}
	f, err := os.Create(l.img)
	if err != nil {
		return fail(err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	if err := run(mkfs[0], append(mkfs[1:], l.img)...); err != nil {
		return fail(err)
	}
	if err := run("mount", "-o", "loop", "-t", kind, l.img, l.Dir); err != nil {
		return fail(err)
	}
	if out, err := exec.CommandContext(ctx, "findmnt", "-n", "-o", "SOURCE", l.Dir).Output(); err == nil {
		dev := strings.TrimSpace(string(out))
		if run("losetup", "--direct-io=on", dev) == nil {
			b, err := os.ReadFile("/sys/block/" + filepath.Base(dev) + "/loop/dio")
			l.DirectIO = err == nil && strings.TrimSpace(string(b)) == "1"
		}
	}
	return l, nil
}

// Close unmounts the filesystem and removes its image.
func (l *LoopFS) Close() error {
	// mount -o loop made the loop device auto-clearing: it goes with the
	// last unmount. EINVAL is a directory that is no mount point, ENOENT
	// no directory: already unmounted (by hand, or by a Close before).
	gone := func(err error) bool { return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) }
	err := unix.Unmount(l.Dir, 0)
	if err != nil && !gone(err) {
		err = unix.Unmount(l.Dir, unix.MNT_DETACH)
	}
	if err != nil && !gone(err) {
		return &os.PathError{Op: "umount", Path: l.Dir, Err: err}
	}
	return os.RemoveAll(filepath.Dir(l.Dir))
}
