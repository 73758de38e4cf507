package loopfs

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// imageDir is where a loop filesystem of size bytes keeps its image. For a
// test it is /dev/shm when the filesystem is at most 4 GiB and /dev/shm is
// a tmpfs with room for twice that: a loop device in direct I/O mode writes
// each scattered block of the filesystem as its own extent of the image,
// and deleting an image on disk that held 100,000 such extents took over
// two minutes (under a second in memory), most of some filesystem tests'
// time. The filesystem under test is the same. A larger filesystem (a test
// that writes gigabytes) and a benchmark, where I/O should cost what a
// disk's does, keep the image on the disk of TMPDIR.
func imageDir(t testing.TB, size int64) string {
	if _, bench := t.(*testing.B); !bench && size <= 4<<30 {
		var st unix.Statfs_t
		if unix.Statfs("/dev/shm", &st) == nil && st.Type == unix.TMPFS_MAGIC && int64(st.Bavail)*st.Bsize > 2*size {
			if dir, err := os.MkdirTemp("/dev/shm", "sparsesync-loop-"); err == nil {
				t.Cleanup(func() { os.RemoveAll(dir) })
				return dir
			}
		}
	}
	return t.TempDir()
}
