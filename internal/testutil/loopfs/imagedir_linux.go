package loopfs

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// imageDir is where a loop filesystem's image goes. For a test it is
// /dev/shm when that is a tmpfs with room: a loop device in direct I/O mode
// writes each scattered block of the filesystem as its own extent of the
// image, and deleting an image on disk that holds 100,000 such extents took
// over two minutes (under a second in memory), which was most of some
// filesystem tests' time. The filesystem under test is the same. A
// benchmark keeps its image on disk (TMPDIR), where I/O costs what a disk's
// does.
func imageDir(t testing.TB) string {
	if _, bench := t.(*testing.B); !bench {
		var st unix.Statfs_t
		if unix.Statfs("/dev/shm", &st) == nil && st.Type == unix.TMPFS_MAGIC && int64(st.Bavail)*st.Bsize > 2<<30 {
			if dir, err := os.MkdirTemp("/dev/shm", "sparsesync-loop-"); err == nil {
				t.Cleanup(func() { os.RemoveAll(dir) })
				return dir
			}
		}
	}
	return t.TempDir()
}
