package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// syncFS makes everything on the filesystem holding path durable
// (syncfs(2)), as the runs of tools that do not sync themselves end.
func syncFS(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return rawfd.Do(f, func(fd int) error {
		if err := unix.Syncfs(fd); err != nil {
			return &os.PathError{Op: "syncfs", Path: path, Err: err}
		}
		return nil
	})
}

// dropCaches drops the clean page cache, dentries and inodes, so the next
// run starts cold. The caller has synced its own filesystem first (a global
// sync(2) would wait for every other writer on the machine). It needs
// root; it reports whether it could.
func dropCaches() bool {
	if os.Geteuid() != 0 {
		return false
	}
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0) == nil
}

// evictFiles drops the cached pages of every regular file under dir
// (POSIX_FADV_DONTNEED), so that the next run reads them from the device
// while everything else, the tools' binaries included, stays cached. The
// caller has synced the filesystem first: dirty pages are not dropped.
// Any user may evict pages of a file it can open.
func evictFiles(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer f.Close()
		return rawfd.Do(f, func(fd int) error {
			if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
				return &os.PathError{Op: "fadvise", Path: path, Err: err}
			}
			return nil
		})
	})
}

// deviceStat is the stat file of the block device holding path, or "" when
// there is none (tmpfs, overlay).
func deviceStat(path string) string {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return ""
	}
	maj, mnr := unix.Major(st.Dev), unix.Minor(st.Dev)
	if maj == 0 {
		return ""
	}
	p := fmt.Sprintf("/sys/dev/block/%d:%d/stat", maj, mnr)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// deviceWritten returns the bytes the device has written since boot (field
// 7 of its stat file: 512-byte sectors written), -1 when unknown.
func deviceWritten(stat string) int64 { return deviceSectors(stat, 6) }

// deviceRead returns the bytes the device has read since boot (field 3 of
// its stat file: 512-byte sectors read), -1 when unknown.
func deviceRead(stat string) int64 { return deviceSectors(stat, 2) }

// deviceSectors returns field i (0-based) of the device's stat file, in
// bytes, -1 when unknown.
func deviceSectors(stat string, i int) int64 {
	if stat == "" {
		return -1
	}
	b, err := os.ReadFile(stat)
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) <= i {
		return -1
	}
	n, err := strconv.ParseInt(f[i], 10, 64)
	if err != nil {
		return -1
	}
	return n * 512
}

// fsType names the filesystem holding path as the kernel does.
func fsType(path string) string {
	var s unix.Statfs_t
	if err := unix.Statfs(path, &s); err != nil {
		return "unknown"
	}
	switch s.Type {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlay"
	}
	return fmt.Sprintf("0x%x", s.Type)
}

// userHZ is the unit of /proc/stat's times: USER_HZ, 100 on every
// architecture Linux runs Go on.
const userHZ = 100

// busyCPU returns the CPU seconds the machine has spent busy since boot:
// the user, nice, system, irq, softirq and steal times of /proc/stat's
// "cpu" line (every CPU; idle and iowait left out). -1 if unreadable.
func busyCPU() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return -1
	}
	var ticks uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system - - irq softirq steal
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return -1
		}
		ticks += v
	}
	return float64(ticks) / userHZ
}

// childUsage returns a finished child's user and system CPU seconds and
// peak resident set size in bytes.
func childUsage(ps *os.ProcessState) (user, sys float64, rss int64) {
	if ps == nil {
		return 0, 0, 0
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss * 1024
	}
	return ps.UserTime().Seconds(), ps.SystemTime().Seconds(), rss
}

// hostInfo describes the machine.
func hostInfo() Host {
	var h Host
	h.Hostname, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		h.MemBytes = int64(si.Totalram) * int64(si.Unit)
	}
	h.Load1Start = loadAvg()
	return h
}

// loadAvg returns the 1-minute load average (0 if unknown).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
