package bench_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// TestWorkloadsAreSeeded: the same seed gives the same bytes and holes, a
// different seed a different layout, and each layout has the shape its
// description promises (checked with a bare SEEK_DATA loop).
func TestWorkloadsAreSeeded(t *testing.T) {
	dir := loopfs.Mount(t, loopfs.Tmpfs, 256<<20)
	g := &bench.GenOptions{Scale: 1.0 / 64, Seed: 3}
	for _, c := range []struct {
		name             string
		minPct, maxPct   float64
		minExt, maxExt   int
		seedChangesShape bool
	}{
		{"sparse-10pct", 5, 15, 100, 160, true},
		{"tiny-extents", 49, 51, 1500, 1600, false},
		{"dense", 100, 100, 1, 1, false},
		{"sparse-1pct-large", 0.5, 1.5, 100, 160, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := bench.WorkloadNamed(c.name)
			if err != nil {
				t.Fatal(err)
			}
			a, b, other := filepath.Join(dir, c.name+".a"), filepath.Join(dir, c.name+".b"), filepath.Join(dir, c.name+".c")
			for _, p := range []struct {
				path string
				seed uint64
			}{{a, 3}, {b, 3}, {other, 4}} {
				g := g
				g.Seed = p.seed
				if err := w.Generate(t.Context(), p.path, g); err != nil {
					t.Fatal(err)
				}
			}
			ea, eb, eo := layout.SeekWalk(t, a), layout.SeekWalk(t, b), layout.SeekWalk(t, other)
			if !equalRanges(ea, eb) || !sameBytes(t, a, b) {
				t.Fatal("the same seed gave different files")
			}
			if c.seedChangesShape == equalRanges(ea, eo) {
				t.Errorf("another seed changed the layout: %v, want %v", !equalRanges(ea, eo), c.seedChangesShape)
			}
			st, _ := os.Stat(a)
			if st.Size() != w.ScaledSize(g) {
				t.Errorf("size %d, want %d", st.Size(), w.ScaledSize(g))
			}
			var data int64
			for _, r := range ea {
				data += r.Len
			}
			pct := 100 * float64(data) / float64(st.Size())
			if pct < c.minPct || pct > c.maxPct || len(ea) < c.minExt || len(ea) > c.maxExt {
				t.Errorf("%.2f%% data in %d extents, want %v-%v%% in %d-%d", pct, len(ea), c.minPct, c.maxPct, c.minExt, c.maxExt)
			}
			// The data bench's time estimate counts on is what is there.
			if est := 100 * float64(w.ScaledData(g)) / float64(st.Size()); est < c.minPct || est > c.maxPct {
				t.Errorf("ScaledData says %.2f%% data, the file has %.2f%%", est, pct)
			}
		})
	}
}

func equalRanges(a, b []layout.Range) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameBytes(t *testing.T, a, b string) bool {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(x, y)
}

// TestChanges: each change script changes what it says, and reports the
// bytes it changed, compared block by block with the original.
func TestChanges(t *testing.T) {
	dir := loopfs.Mount(t, loopfs.Tmpfs, 256<<20)
	w, _ := bench.WorkloadNamed("dense")
	g := &bench.GenOptions{Scale: 1.0 / 64} // 16 MiB of data
	base := filepath.Join(dir, "base")
	if err := w.Generate(t.Context(), base, g); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"resync-1pct", "append", "trim"} {
		t.Run(name, func(t *testing.T) {
			ch, err := bench.ChangeNamed(name)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, orig, 0o644); err != nil {
				t.Fatal(err)
			}
			n, err := ch.Apply(t.Context(), p, 1)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var diff int64
			for off := 0; off < len(orig); off += 4096 {
				if !bytes.Equal(orig[off:off+4096], got[off:off+4096]) {
					diff += 4096
				}
			}
			onePct := int64(len(orig)) / 100 / 4096 * 4096
			switch name {
			case "resync-1pct":
				if diff != n || n != onePct || len(got) != len(orig) {
					t.Errorf("%d bytes differ, reported %d, want %d", diff, n, onePct)
				}
			case "append":
				if diff != 0 || int64(len(got)-len(orig)) != n || n != onePct || bytes.Count(got[len(orig):], []byte{0}) > len(got[len(orig):])/8 {
					t.Errorf("appended %d (reported %d, want %d), %d old bytes changed", len(got)-len(orig), n, onePct, diff)
				}
			case "trim":
				holes := int64(len(orig)) - dataBytes(t, p)
				if diff != n || holes != n || n < onePct-64<<10 || n > onePct+64<<10 {
					t.Errorf("%d bytes differ, %d became holes, reported %d, want about %d", diff, holes, n, onePct)
				}
			}
		})
	}
	if _, err := bench.ChangeNamed("nope"); err == nil {
		t.Error("an unknown change script was accepted")
	}
}

func dataBytes(t *testing.T, p string) int64 {
	var n int64
	for _, r := range layout.SeekWalk(t, p) {
		n += r.Len
	}
	return n
}

// TestVMImage: the vm-image workload is an ext4 filesystem (e2fsck finds
// it clean) holding the tree it was given, file for file (read back with
// debugfs, not through our code), on a sparse file with holes, and the
// same tree gives the same image.
func TestVMImage(t *testing.T) {
	for _, p := range []string{"mkfs.ext4", "e2fsck", "debugfs"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s not found (package e2fsprogs)", p)
		}
	}
	dir := loopfs.Mount(t, loopfs.Tmpfs, 256<<20)
	tree := filepath.Join(dir, "tree")
	files := map[string][]byte{
		"a.txt":             []byte("hello from the vm image\n"),
		"sub/b.bin":         bytes.Repeat([]byte{0xa5, 0x5a, 1, 2}, 50_000),
		"sub/deeper/c.conf": []byte("key = value\n"),
	}
	for name, b := range files {
		p := filepath.Join(tree, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w, err := bench.WorkloadNamed("vm-image")
	if err != nil {
		t.Fatal(err)
	}
	g := &bench.GenOptions{Scale: 1.0 / 64, TreeDir: tree} // 32 MiB
	img, again := filepath.Join(dir, "vm.img"), filepath.Join(dir, "vm2.img")
	for _, p := range []string{img, again} {
		if err := w.Generate(t.Context(), p, g); err != nil {
			t.Fatal(err)
		}
	}
	if !sameBytes(t, img, again) {
		t.Error("the same tree gave different images")
	}
	st, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != w.ScaledSize(g) {
		t.Errorf("size %d, want %d", st.Size(), w.ScaledSize(g))
	}
	var data int64
	for _, r := range layout.SeekWalk(t, img) {
		data += r.Len
	}
	if data == 0 || data >= st.Size() {
		t.Errorf("%d data bytes in a %d-byte image: not sparse", data, st.Size())
	}
	if out, err := exec.Command("e2fsck", "-fn", img).CombinedOutput(); err != nil {
		t.Errorf("e2fsck -fn: %v: %s", err, out)
	}
	for name, want := range files {
		out := filepath.Join(dir, "out")
		os.Remove(out)
		if b, err := exec.Command("debugfs", "-R", "dump /"+name+" "+out, img).CombinedOutput(); err != nil {
			t.Fatalf("debugfs dump %s: %v: %s", name, err, b)
		}
		got, err := os.ReadFile(out)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s in the image: %d bytes (%v), want %d", name, len(got), err, len(want))
		}
	}
}

// TestWideWorkload: the wide workload (issue 26's file) at a thousandth of
// its scale is 1,100 extents of 4 KiB, one every 1.9 MiB (a bare
// SEEK_DATA loop), and runs only when named.
func TestWideWorkload(t *testing.T) {
	dir := loopfs.Mount(t, loopfs.Tmpfs, 64<<20)
	w, err := bench.WorkloadNamed("wide")
	if err != nil {
		t.Fatal(err)
	}
	if !w.OptIn {
		t.Error("wide runs by default")
	}
	p := filepath.Join(dir, "wide")
	if err := w.Generate(t.Context(), p, &bench.GenOptions{Scale: 1.0 / 1000}); err != nil {
		t.Fatal(err)
	}
	ext := layout.SeekWalk(t, p)
	if len(ext) != 1100 {
		t.Fatalf("%d extents, want 1100", len(ext))
	}
	for i, e := range ext {
		if e.Off != int64(i)*1900<<10 || e.Len != 4096 {
			t.Fatalf("extent %d is %+v, want 4 KiB at %d", i, e, int64(i)*1900<<10)
		}
	}
}
