package sparse

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
)

// FuzzWalk builds a file from a script of writes, punches and truncates and
// checks the walker differentially: it must agree with a bare SEEK_DATA/
// SEEK_HOLE loop, return a canonical map, and cover every non-zero byte.
func FuzzWalk(f *testing.F) {
	f.Add([]byte{0, 1, 2, 1, 5, 3, 2, 0, 1})
	f.Add([]byte{3, 200, 0, 10, 0, 4, 1, 2, 3})
	f.Add([]byte{0, 255, 255, 1, 0, 255})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) > 300 {
			t.Skip("long scripts add nothing a short one cannot reach")
		}
		path := filepath.Join(dir, "walk")
		file, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		const unit = 1024 // offsets in KiB steps plus a byte, so edges are unaligned
		buf := make([]byte, 64<<10)
		for i := 0; i+2 < len(script); i += 3 {
			off := int64(script[i+1])*unit*3 + int64(script[i+2]%7)
			n := int64(script[i+2])*97 + 1
			switch script[i] % 4 {
			case 0, 1:
				n = min(n, int64(len(buf)))
				layout.Pattern(buf[:n], off)
				_, err = file.WriteAt(buf[:n], off)
			case 2:
				_, err = PunchHole(file, off, n)
			case 3:
				err = file.Truncate(off)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		w, err := NewWalker(file)
		if err != nil {
			t.Fatal(err)
		}
		m, err := w.Map(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(m.Size(), m.Extents()); err != nil {
			t.Fatalf("walker map %v not canonical: %v", m, err)
		}
		var ref []Extent
		for _, r := range layout.SeekWalk(t, path) {
			ref = append(ref, Extent{r.Off, r.Len})
		}
		if !slices.Equal(ref, m.Extents()) {
			t.Fatalf("walker %v, plain seek loop %v", m.Extents(), ref)
		}
		content, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range content {
			if c != 0 && !m.Contains(int64(i)) {
				t.Fatalf("byte %d is %#x but outside the data map %v", i, c, m)
			}
		}
	})
}
