package sparse

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestFirstDiff: FirstDiff finds the first differing byte inside the map's
// extents, in any chunk (pace shortens them), ignores what lies outside
// the map (holes of both), and stops on pace's error.
func TestFirstDiff(t *testing.T) {
	const size = 3 << 20
	base := make([]byte, size)
	for i := range base {
		base[i] = byte(i*7 + 1)
	}
	changed := func(offs ...int) []byte {
		b := bytes.Clone(base)
		for _, o := range offs {
			b[o] ^= 0xff
		}
		return b
	}
	all, err := NewMap(size, Extent{Off: 0, Len: size})
	if err != nil {
		t.Fatal(err)
	}
	part, err := NewMap(size, Extent{Off: 4096, Len: 1 << 20}, Extent{Off: 2 << 20, Len: 8192})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		m    Map
		pace func(int64) (int64, error)
		want int64
	}{
		{"same", changed(), all, nil, -1},
		{"first byte", changed(0), all, nil, 0},
		{"second chunk, two diffs", changed(1<<20+17, 2<<20), all, nil, 1<<20 + 17},
		{"last byte", changed(size - 1), all, nil, size - 1},
		{"outside the map", changed(0, 4095, 1<<20+4096, size-1), part, nil, -1},
		{"second extent", changed(2<<20 + 8191), part, nil, 2<<20 + 8191},
		{"small chunks", changed(5*4096 + 3), all, func(n int64) (int64, error) { return min(n, 4096), nil }, 5*4096 + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FirstDiff(t.Context(), bytes.NewReader(base), bytes.NewReader(tc.b), tc.m, tc.pace)
			if err != nil || got != tc.want {
				t.Fatalf("FirstDiff = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	stop := errors.New("budget closed")
	if _, err := FirstDiff(t.Context(), bytes.NewReader(base), bytes.NewReader(base), all,
		func(int64) (int64, error) { return 0, stop }); !errors.Is(err, stop) {
		t.Fatalf("pace's error: got %v", err)
	}
}

// TestDiffFiles: DiffFiles reports both sizes, skips the bytes when they
// differ, and finds a difference inside data while a hole and written
// zeros compare equal.
func TestDiffFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int64, at map[int64][]byte) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		for _, off := range slices.Sorted(maps.Keys(at)) { // in order: a later write lands on an earlier one
			if _, err := f.WriteAt(at[off], off); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	data := bytes.Repeat([]byte("d"), 8192)
	a := write("a", 1<<20, map[int64][]byte{65536: data})
	zeros := write("zeros", 1<<20, map[int64][]byte{65536: data, 0: make([]byte, 4096)})
	changed := write("changed", 1<<20, map[int64][]byte{65536: data, 65536 + 100: []byte("x")})
	longer := write("longer", 2<<20, map[int64][]byte{65536: data})
	extra := write("extra", 1<<20, map[int64][]byte{65536: data, 524288: []byte("y")}) // data where a has a hole
	for _, tc := range []struct {
		b      string
		sizeB  int64
		offset int64
	}{{zeros, 1 << 20, -1}, {changed, 1 << 20, 65536 + 100}, {longer, 2 << 20, -1}, {extra, 1 << 20, 524288}} {
		sa, sb, off, err := DiffFiles(t.Context(), a, tc.b, nil)
		if err != nil || sa != 1<<20 || sb != tc.sizeB || off != tc.offset {
			t.Fatalf("DiffFiles(a, %s) = %d, %d, %d, %v; want %d, %d, %d", filepath.Base(tc.b), sa, sb, off, err, 1<<20, tc.sizeB, tc.offset)
		}
	}
	if _, _, _, err := DiffFiles(t.Context(), a, filepath.Join(dir, "missing"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
