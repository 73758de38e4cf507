package bench

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/sparse"
)

// floorSource writes a 32 MiB file holding 4 MiB of data in four extents
// of 1 MiB, durable, and returns its path.
func floorSource(t *testing.T, dir string) string {
	t.Helper()
	src := filepath.Join(dir, "src")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(i*13 + 5)
	}
	for off := int64(0); off < 32<<20; off += 8 << 20 {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(32 << 20); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return src
}

// TestFloorMethods: the floor's ways reach the device as their names say.
// Each, from a cold source, reads the source's 4 MiB of data from the
// device and writes the bytes asked for to it; the ways that read directly
// leave the source out of the page cache, the buffered way brings its data
// in; the ways that write through the cache start its writeback every
// 8 MiB; and none leaves its output file behind.
func TestFloorMethods(t *testing.T) {
	dir := loopfs.Mount(t, loopfs.Ext4, 256<<20)
	src := floorSource(t, dir)
	out := filepath.Join(dir, "floor.out")
	const data, writeBytes = 4 << 20, 24 << 20
	// Whether each way reads directly, as its name says.
	readsDirect := map[string]bool{"direct": true, "buffered": false, "direct-read": true}
	for _, way := range floorWays {
		direct, ok := readsDirect[way.String()]
		if !ok {
			t.Fatalf("a floor way with no expectation here: %s", way)
		}
		if err := evictFiles(dir); err != nil {
			t.Fatal(err)
		}
		stat := deviceStat(dir)
		before, readBefore := deviceWritten(stat), deviceRead(stat)
		if stat == "" || before < 0 || readBefore < 0 {
			t.Fatalf("no device counts for %s (stat %q)", dir, stat)
		}
		fr, err := measureFloor(context.Background(), []string{src}, out, writeBytes, way, false)
		if err != nil {
			t.Fatal(err)
		}
		// Writes through the cache start their writeback every 8 MiB.
		if wantKicks := map[string]int{"direct": 0, "buffered": 3, "direct-read": 3}[way.String()]; fr.writebacks != wantKicks {
			t.Errorf("%s: %d writebacks started while writing %d bytes, want %d", way, fr.writebacks, writeBytes, wantKicks)
		}
		written, read := deviceSince(dir, stat, before, readBefore)
		if read < data {
			t.Errorf("%s: the device read %d bytes, want at least the source's %d of data", way, read, data)
		}
		if written < writeBytes {
			t.Errorf("%s: the device wrote %d bytes, want at least %d", way, written, writeBytes)
		}
		cached := cachedPages(t, src)
		if direct && cached != 0 {
			t.Errorf("%s: %d pages of the source cached after O_DIRECT reads of a cold source", way, cached)
		}
		if !direct && cached < data/4096 {
			t.Errorf("%s: %d pages of the source cached, want its %d pages of data", way, cached, data/4096)
		}
		if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %s left behind (%v)", way, out, err)
		}
	}
}

// TestFloorSamplesCountOneMethodEach: the floor of a round measures every
// way, each with its own device counts (not summed), and keeps the
// fastest.
func TestFloorSamplesCountOneMethodEach(t *testing.T) {
	dir := loopfs.Mount(t, loopfs.Ext4, 256<<20)
	src := floorSource(t, dir)
	s := &session{rep: &Report{Host: Host{Evict: "files"}}}
	const writeBytes = 8 << 20
	both, err := s.floorSamples(context.Background(), []string{src}, dir, writeBytes, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"direct", "buffered", "direct-read"} {
		r := both[i]
		if r.FloorMethod != want || r.Wall <= 0 {
			t.Errorf("sample %d: method %q, wall %v; want %s", i, r.FloorMethod, r.Wall, want)
		}
		// One way writes 8 MiB and a little metadata, and reads the 4 MiB
		// of data; two would be twice that.
		if r.DeviceWritten < writeBytes || r.DeviceWritten >= writeBytes*3/2 {
			t.Errorf("%s: the device wrote %d bytes, want one way's %d", want, r.DeviceWritten, writeBytes)
		}
		if r.DeviceRead < 4<<20 || r.DeviceRead >= 6<<20 {
			t.Errorf("%s: the device read %d bytes, want one way's 4 MiB", want, r.DeviceRead)
		}
	}
	r, err := s.floorSample(context.Background(), []string{src}, dir, writeBytes, false)
	if err != nil {
		t.Fatal(err)
	}
	if r.FloorMethod == "" || r.Wall <= 0 {
		t.Errorf("kept %+v", r)
	}
}

// TestFloorWrites: the floor writes its bytes from offset 0 as one run of
// 1 MiB requests, or with keepHoles (floor-holes) the source's own data
// chunks at their offsets, so that its output has the source's holes.
func TestFloorWrites(t *testing.T) {
	const mib = 1 << 20
	src := []sparse.Extent{{Off: 0, Len: 4096}, {Off: 8192, Len: 4096}, {Off: 5 * mib, Len: mib}, {Off: 6 * mib, Len: 4096}}
	if got := floorWrites(src, 12288, true); !slices.Equal(got, src) {
		t.Errorf("keepHoles: wrote %v, want the source's chunks %v", got, src)
	}
	want := []sparse.Extent{{Off: 0, Len: mib}, {Off: mib, Len: mib}, {Off: 2 * mib, Len: 4096}}
	if got := floorWrites(src, 2*mib+1, false); !slices.Equal(got, want) {
		t.Errorf("contiguous: wrote %v, want %v", got, want)
	}
}
