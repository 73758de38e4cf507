package wire

import (
	"testing"

	"github.com/sparsesync/sparsesync/sparse"
)

// FuzzDecoders feeds arbitrary bytes to every decoder of peer input in
// the package (header, HELLO, WINDOW, BATCH, DATA payloads, body fields): none
// may panic, allocate past the limits, or accept what breaks its rules.
func FuzzDecoders(f *testing.F) {
	var h [HeaderLen]byte
	PutHeader(&h, Data, FlagCodecLZ4, 12)
	f.Add(h[:], uint8(FlagCodecLZ4), uint32(100))
	f.Add(NewHello(FeatWindows).Marshal(), uint8(0), uint32(41))
	wf, _ := WindowFrame(0, 1<<20, []sparse.Extent{{Off: 4096, Len: 8192}})
	f.Add(wf, uint8(FlagCodecZstd), uint32(12))
	var e Encoder
	z, _ := e.Compress(FlagCodecZstd, make([]byte, 4096), make([]byte, 0, 8192))
	f.Add(z, uint8(FlagCodecZstd), uint32(4096))
	f.Add(AppendBatchHead(nil, []Range{{0, 4096}, {8192, 4096}}), uint8(0), uint32(8192))
	dst := make([]byte, MaxDataPayload)
	var d Decoder
	var bb BatchBody
	f.Fuzz(func(t *testing.T, b []byte, flags uint8, rawLen uint32) {
		if len(b) > 2*MaxFrame {
			t.Skip("larger than any frame")
		}
		if len(b) >= HeaderLen {
			if ft, _, n, err := ParseHeader(b); err == nil && n > ft.Limit() {
				t.Fatalf("%s header of %d bytes over its limit", ft, n)
			}
		}
		if _, err := ParseHello(b); err == nil && len(b) != HelloLen {
			t.Fatalf("HELLO of %d bytes taken", len(b))
		}
		if hi, ext, err := ParseWindow(b, 0, MaxSize, 4096); err == nil {
			for _, x := range ext {
				if x.Off < 0 || x.End() > hi {
					t.Fatalf("extent %v outside the window [0,%d)", x, hi)
				}
			}
		}
		if err := bb.Parse(b, 1<<40); err == nil {
			sum, end := 0, int64(0)
			for i, r := range bb.Ranges {
				if r.Len <= 0 || r.Off < 0 || r.Off+r.Len > 1<<40 || (i > 0 && r.Off < end) {
					t.Fatalf("BATCH range %v taken after one ending at %d", r, end)
				}
				sum, end = sum+int(r.Len), r.End()
			}
			if len(bb.Ranges) == 0 || sum != bb.RawLen || sum > MaxDataPayload {
				t.Fatalf("BATCH of %d ranges, %d bytes (RawLen %d) taken", len(bb.Ranges), sum, bb.RawLen)
			}
		}
		n := int(rawLen % (MaxDataPayload + 1))
		if out, err := d.Decompress(flags, b, n, dst); err == nil && len(out) != n {
			t.Fatalf("DATA of %d bytes for %d announced", len(out), n)
		}
		dd := Dec{B: b, T: Fetch}
		for dd.Err == nil {
			dd.U8()
			dd.Bytes(int(flags) * 64)
		}
	})
}
