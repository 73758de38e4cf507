package tcpsync

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
)

// writeImage makes a sparse image of size bytes holding about frac of data
// in nExt extents of 64 KiB-4 MiB; each 64 KiB piece is random (45%),
// text-like JSON log lines (45%) or zeros (10%), like the design's image.
func writeImage(path string, size int64, frac float64, nExt int, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, 7))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	want := int64(float64(size) * frac)
	avg := want / int64(nExt)
	var offs []int64
	for range nExt {
		offs = append(offs, r.Int64N(size/65536)*65536)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	buf := make([]byte, 65536)
	line := 0
	var end int64
	for _, off := range offs {
		if off < end {
			off = end + 65536
		}
		n := (avg/2 + r.Int64N(avg+1)) / 65536 * 65536
		n = max(65536, n)
		if off+n > size {
			n = size - off
		}
		for p := off; p < off+n; p += 65536 {
			c := min(65536, off+n-p)
			switch x := r.IntN(20); {
			case x < 9:
				for i := 0; i < len(buf); i += 8 {
					binary.LittleEndian.PutUint64(buf[i:], r.Uint64())
				}
			case x < 18:
				b := buf[:0]
				for len(b) < len(buf) {
					line++
					b = fmt.Appendf(b, `{"ts":%d,"level":"info","msg":"request served","path":"/v1/items/%d","status":200,"ms":%d}`+"\n", 1700000000+line, r.IntN(5000), r.IntN(300))
				}
				buf = buf[:65536]
			default:
				clear(buf)
			}
			if _, err := f.WriteAt(buf[:c], p); err != nil {
				return err
			}
		}
		end = off + n
	}
	return nil
}
