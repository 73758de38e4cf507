package disks

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// statfs returns the filesystem's size and the bytes available to an
// unprivileged writer, as Longhorn's disk monitor reads them.
func statfs(path string) (maxBytes, avail int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil
}

// device returns the device number of the filesystem path is on.
func device(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return st.Dev, nil
}

// allocated returns the bytes a file occupies (st_blocks × 512).
func allocated(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// mount is one line of /proc/self/mountinfo.
type mount struct {
	point  string // where it is mounted
	fsID   string // major:minor of the filesystem (its superblock)
	fsType string
	source string
}

// mountOf returns the mount that holds path (symlinks resolved): the one
// whose mount point is the longest prefix of it, the last mounted winning
// among mounts stacked on one point. Its fsID names the filesystem, not
// st_dev: btrfs gives each subvolume an st_dev of its own, but all of them
// one major:minor here, and a bind mount keeps the major:minor of the
// filesystem it shows.
func mountOf(path string) (mount, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return mount{}, err
	}
	const info = "/proc/self/mountinfo"
	f, err := os.Open(info)
	if err != nil {
		return mount{}, err
	}
	defer f.Close()
	var best mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - type source superoptions
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || sep+2 >= len(fields) {
			return mount{}, fmt.Errorf("%s: malformed line %q", info, sc.Text())
		}
		m := mount{point: unescapeMount(fields[4]), fsID: fields[2], fsType: fields[sep+1], source: unescapeMount(fields[sep+2])}
		if (real == m.point || m.point == "/" || strings.HasPrefix(real, m.point+"/")) && len(m.point) >= len(best.point) {
			best = m
		}
	}
	if err := sc.Err(); err != nil {
		return mount{}, err
	}
	if best.point == "" {
		return mount{}, fmt.Errorf("%s: no mount holds %s", info, real)
	}
	return best, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
