// Package loopfs gives tests scratch filesystems of a chosen kind: ext4, XFS
// (with reflink), btrfs on a loop device, and tmpfs. Each is made fresh,
// mounted in a temporary directory and unmounted and deleted in t.Cleanup.
//
// Making loop filesystems needs root, a loop device and the mkfs tools. When
// one of those is missing the test is skipped with a message saying what is
// missing, unless the environment variable SPARSESYNC_REQUIRE_FS=1 is set (as
// CI does): then the test fails, so a run cannot pass without having tested
// on real filesystems.
package loopfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Kind is a filesystem type.
type Kind string

// The filesystem kinds of the test matrix.
const (
	Ext4  Kind = "ext4"
	XFS   Kind = "xfs"
	Btrfs Kind = "btrfs"
	Tmpfs Kind = "tmpfs"
)

// All is the test matrix, in the order tests run it.
var All = []Kind{Ext4, XFS, Btrfs, Tmpfs}

// Reflink reports whether the kind can share blocks between files (FICLONE).
func (k Kind) Reflink() bool { return k == XFS || k == Btrfs }

// DefaultSize is the size of a loop filesystem when the caller does not care.
const DefaultSize = 4 << 30

// RequireEnv is the environment variable that turns skips into failures.
const RequireEnv = "SPARSESYNC_REQUIRE_FS"

// Required reports whether filesystem tests must run rather than skip.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Unavailable skips the test with why, or fails it when filesystem tests are
// required. Use it for any test that cannot run without real filesystems.
func Unavailable(t testing.TB, why string) {
	t.Helper()
	if Required() {
		t.Fatalf("filesystem test cannot run (%s=1 is set): %s", RequireEnv, why)
	}
	t.Skipf("skipping filesystem test: %s (run as root with xfsprogs and btrfs-progs installed to run it)", why)
}

// NeedRoot skips (or fails, see Required) unless the test runs as root.
func NeedRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, "not running as root")
	}
}

// Mount makes a fresh filesystem of the given kind and size (bytes; the
// backing image is sparse, so only what is written costs disk space), mounts
// it on a loop device in direct I/O mode and returns the mount point. tmpfs is a private tmpfs mount of that size
// when running as root, otherwise a directory under /dev/shm. A test's image
// lives in memory (see imageDir); a benchmark's on the disk of TMPDIR.
func Mount(t testing.TB, kind Kind, size int64) string {
	t.Helper()
	return MountWith(t, kind, size)
}

// MountWith is Mount with extra mkfs options (for example "-b", "1024" for
// ext4's smallest blocks: the most extents per byte of data).
func MountWith(t testing.TB, kind Kind, size int64, mkfsOpts ...string) string {
	t.Helper()
	if kind == Tmpfs && os.Geteuid() != 0 {
		return shmDir(t)
	}
	NeedRoot(t)
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if kind == Tmpfs {
		mount(t, mnt, "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10), "tmpfs", mnt)
		return mnt
	}
	img := filepath.Join(imageDir(t, size), "fs.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("making %s image: %v", kind, err)
	}
	t.Cleanup(func() { os.Remove(img) })
	var mkfs []string
	switch kind {
	case Ext4:
		mkfs = []string{"mkfs.ext4", "-q", "-F", "-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1", img}
	case XFS:
		mkfs = []string{"mkfs.xfs", "-q", "-f", "-K", "-m", "reflink=1", img}
	case Btrfs:
		mkfs = []string{"mkfs.btrfs", "-q", "-f", "-K", img}
	default:
		t.Fatalf("loopfs: unknown filesystem kind %q", kind)
	}
	mkfs = append(mkfs[:len(mkfs)-1:len(mkfs)-1], append(mkfsOpts, img)...)
	if _, err := exec.LookPath(mkfs[0]); err != nil {
		Unavailable(t, mkfs[0]+" not found")
	}
	// mkfs of an image file is repeatable (-f). mkfs.btrfs looks through
	// the system's loop devices to see whether the image is mounted, and
	// one torn down meanwhile (a parallel test's) failed it once with
	// ENXIO; a second try is a fresh look.
	var out []byte
	for try := 0; try < 3; try++ {
		if out, err = exec.Command(mkfs[0], mkfs[1:]...).CombinedOutput(); err == nil {
			break
		}
		t.Logf("%s: %v: %s (trying again)", strings.Join(mkfs, " "), err, bytes.TrimSpace(out))
	}
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(mkfs, " "), err, bytes.TrimSpace(out))
	}
	mount(t, mnt, "-o", "loop", "-t", string(kind), img, mnt)
	directIO(t, mnt)
	return mnt
}

// directIO switches the loop device under mnt to direct I/O: it then hands
// many requests at a time to the backing file, asynchronously, as a real
// disk's queue takes them, instead of one at a time through a second page
// cache (a buffered loop device serializes reads, which hides the gain of
// keeping several in flight). Where the kernel or the backing filesystem
// cannot, the device stays buffered and the test says so with -v.
func directIO(t testing.TB, mnt string) {
	t.Helper()
	src, err := exec.Command("findmnt", "-n", "-o", "SOURCE", mnt).Output()
	dev := strings.TrimSpace(string(src))
	if err != nil || !strings.HasPrefix(dev, "/dev/loop") {
		t.Logf("loopfs: %s: no loop device found (%v); I/O stays buffered", mnt, err)
		return
	}
	if out, err := exec.Command("losetup", "--direct-io=on", dev).CombinedOutput(); err != nil {
		t.Logf("loopfs: losetup --direct-io=on %s: %v: %s; I/O stays buffered", dev, err, bytes.TrimSpace(out))
		return
	}
	if b, err := os.ReadFile("/sys/block/" + filepath.Base(dev) + "/loop/dio"); err != nil || strings.TrimSpace(string(b)) != "1" {
		t.Logf("loopfs: %s: direct I/O not enabled by the kernel; I/O stays buffered", dev)
	}
}

func mount(t testing.TB, mnt string, args ...string) {
	t.Helper()
	out, err := exec.Command("mount", args...).CombinedOutput()
	if err != nil {
		msg := string(bytes.TrimSpace(out))
		if strings.Contains(msg, "loop") || strings.Contains(msg, "unknown filesystem") {
			Unavailable(t, "mount "+strings.Join(args, " ")+": "+msg)
		}
		t.Fatalf("mount %s: %v: %s", strings.Join(args, " "), err, msg)
	}
	t.Cleanup(func() {
		if err := unmount(mnt); err != nil {
			t.Errorf("loopfs: %v", err)
		}
	})
}

// unmount retries while the mount is busy (a file still closing), then
// detaches it lazily so a failed test never leaves a mount behind.
func unmount(mnt string) error {
	var out []byte
	var err error
	for range 20 {
		if out, err = exec.Command("umount", mnt).CombinedOutput(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lerr := exec.Command("umount", "-l", mnt).Run(); lerr == nil {
		return nil
	}
	return fmt.Errorf("umount %s: %v: %s", mnt, err, bytes.TrimSpace(out))
}

func shmDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "sparsesync-test-")
	if err != nil {
		Unavailable(t, "tmpfs at /dev/shm: "+err.Error())
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Run runs fn as a subtest on a fresh filesystem of every kind in All.
func Run(t *testing.T, size int64, fn func(t *testing.T, kind Kind, dir string)) {
	t.Helper()
	for _, kind := range All {
		t.Run(string(kind), func(t *testing.T) {
			fn(t, kind, Mount(t, kind, size))
		})
	}
}

// DropCaches writes dirty data and drops the page cache, so that maps of
// unwritten extents and cold-read timings do not depend on what ran before.
// It does nothing when not root.
func DropCaches(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	if err := exec.Command("sync").Run(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil && !errors.Is(err, os.ErrPermission) {
		t.Fatalf("drop caches: %v", err)
	}
}

// CoarseTimes mounts a fresh ramfs and returns its directory: a filesystem
// stamped from the coarse clock alone (no multigrain timestamps, which
// Linux 6.13 and later give ext4, XFS, btrfs and tmpfs), where two writes
// in one clock tick leave one mtime. Root only.
func CoarseTimes(t testing.TB) string {
	t.Helper()
	NeedRoot(t)
	mnt := t.TempDir()
	mount(t, mnt, "-t", "ramfs", "ramfs", mnt)
	return mnt
}
