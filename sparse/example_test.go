package sparse_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sparsesync/sparsesync/sparse"
)

// A map says where data is; its holes, set operations and block rounding
// answer the questions a sync asks.
func ExampleMap() {
	src, _ := sparse.NewMap(1<<20, sparse.Extent{Off: 0, Len: 4096}, sparse.Extent{Off: 65536, Len: 100})
	dst, _ := sparse.NewMap(1<<20, sparse.Extent{Off: 0, Len: 8192})
	fmt.Println("holes:      ", src.Holes())
	fmt.Println("to punch:   ", dst.Difference(src))
	fmt.Println("to compare: ", src.Intersect(dst))
	fmt.Println("blocks:     ", src.RoundOut(4096))
	// Output:
	// holes:       size=1048576 [4096,65536) [65636,1048576)
	// to punch:    size=1048576 [4096,8192)
	// to compare:  size=1048576 [0,4096)
	// blocks:      size=1048576 [0,4096) [65536,69632)
}

// The binary form is what goes on the wire; the decoder is strict.
func ExampleDecodeMap() {
	m, _ := sparse.NewMap(10_000_001, sparse.Extent{Off: 9_999_999, Len: 2})
	b, _ := m.MarshalBinary()
	back, err := sparse.DecodeMap(b)
	fmt.Println(len(b), back, err)
	_, err = sparse.DecodeMap(append(b, 0))
	fmt.Println(err)
	// Output:
	// 11 size=10000001 [9999999,10000001) <nil>
	// sparse: encoded map malformed: 1 trailing bytes
}

// Walk a file's data extents with SEEK_DATA/SEEK_HOLE.
func ExampleWalker() {
	path := filepath.Join(os.TempDir(), "sparse-example.img")
	defer os.Remove(path)
	f, _ := os.Create(path)
	defer f.Close()
	f.Truncate(1 << 30)             // a 1 GiB hole
	f.WriteAt([]byte("x"), 1<<30-1) // and its last byte

	w, err := sparse.NewWalker(f)
	if err != nil {
		fmt.Println(err)
		return
	}
	w.Walk(context.Background(), func(e sparse.Extent) error {
		fmt.Println("data", e)
		return nil
	})
	fmt.Println("size", w.Size(), "holes known:", w.HolesKnown())
	// Output:
	// data [1073737728,1073741824)
	// size 1073741824 holes known: true
}
