package layout

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// SeekWalk returns the data ranges of the file at path with the plainest
// possible SEEK_DATA/SEEK_HOLE loop: the reference other walkers are compared
// against.
func SeekWalk(t testing.TB, path string) []Range {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	var out []Range
	var pos int64
	for {
		d, err := unix.Seek(fd, pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return out
		}
		if err != nil {
			t.Fatalf("seek_data %s at %d: %v", path, pos, err)
		}
		h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
		if err != nil {
			t.Fatalf("seek_hole %s at %d: %v", path, d, err)
		}
		out = append(out, Range{Off: d, Len: h - d})
		pos = h
	}
}
