package bench_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/sparse"
)

// TestWalkerAllocationsPerExtent checks the README's claim "0 allocations
// per extent" for sparse.Walker with testing.AllocsPerRun instead of
// quoting a benchmark: walking 4,000 extents allocates exactly as much as
// walking 500.
func TestWalkerAllocationsPerExtent(t *testing.T) {
	dir := loopfs.Mount(t, loopfs.Tmpfs, 64<<20)
	allocs := func(extents int64) float64 {
		l := layout.Layout{Name: "walk", Size: extents * 8192}
		for i := range extents {
			l.Data = append(l.Data, layout.Range{Off: i * 8192, Len: 4096})
		}
		p := filepath.Join(dir, "walk")
		layout.Create(t, p, l)
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w, err := sparse.NewWalker(f)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var seen int64
		fn := func(sparse.Extent) error { seen++; return nil }
		a := testing.AllocsPerRun(5, func() {
			seen = 0
			if err := w.Walk(ctx, fn); err != nil {
				t.Fatal(err)
			}
		})
		if seen != extents {
			t.Fatalf("walked %d extents, want %d", seen, extents)
		}
		return a
	}
	small, large := allocs(500), allocs(4000)
	t.Logf("allocations per walk: %v for 500 extents, %v for 4,000", small, large)
	if large != small {
		t.Errorf("walking 3,500 more extents made %v more allocations (%.4f per extent), want 0", large-small, (large-small)/3500)
	}
}
