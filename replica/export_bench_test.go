package replica

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
)

// BenchmarkExport exports a replica (head + two snapshots, the data spread
// in 1 MiB extents over the volume, a third in each layer, overlapping) of
// several sizes with the same data. The time follows the data, not the
// size: compare ns/op of 10GiB/data=1GiB with 100GiB/data=1GiB.
//
//	go test -run '^$' -bench Export -benchtime 3x -count 3 ./replica/
func BenchmarkExport(b *testing.B) {
	for _, c := range []struct{ size, data int64 }{
		{10 << 30, 1 << 30},
		{100 << 30, 1 << 30},
		{100 << 30, 128 << 20},
	} {
		b.Run(fmt.Sprintf("size=%dGiB/data=%dMiB", c.size>>30, c.data>>20), func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "r")
			const ext = 1 << 20
			n := c.data / ext
			stride := c.size / n / ext * ext
			buf := make([]byte, ext)
			layout.Pattern(buf, 0)
			layers := []string{"volume-head-002.img", "volume-snap-b.img", "volume-snap-a.img"}
			specs := make([]layerSpec, len(layers))
			for i, name := range layers {
				specs[i] = layerSpec{name: name, writes: map[int64][]byte{}}
			}
			writeChainDir(b, dir, c.size, specs)
			files := make([]*os.File, len(layers))
			for i, name := range layers {
				f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
				if err != nil {
					b.Fatal(err)
				}
				files[i] = f
			}
			for k := range n {
				// Extent k lives in layer k%3; every 4th is also
				// overwritten half by the layer above.
				l := int(k % 3)
				if _, err := files[l].WriteAt(buf, k*stride); err != nil {
					b.Fatal(err)
				}
				if k%4 == 0 && l > 0 {
					if _, err := files[l-1].WriteAt(buf[:ext/2], k*stride); err != nil {
						b.Fatal(err)
					}
				}
			}
			for _, f := range files {
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
			}
			out := filepath.Join(b.TempDir(), "vol.img")
			b.SetBytes(c.data)
			b.ReportAllocs()
			for b.Loop() {
				st, err := Export(b.Context(), dir, out, nil)
				if err != nil {
					b.Fatal(err)
				}
				if st.DataBytes != c.data {
					b.Fatalf("exported %d data bytes, want %d", st.DataBytes, c.data)
				}
			}
		})
	}
}
