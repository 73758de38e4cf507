package sparse

import (
	"bytes"
	"testing"
)

// FuzzMapOps checks every map operation against the naive bitmap model.
func FuzzMapOps(f *testing.F) {
	f.Add([]byte{10, 0, 5, 3, 7}, []byte{12, 2, 2, 1, 1, 0, 9}, uint8(4))
	f.Add([]byte{80, 15, 23, 15, 23}, []byte{0}, uint8(1))
	f.Add([]byte{255, 0, 255, 1, 1}, []byte{3, 0, 8}, uint8(63))
	f.Fuzz(func(t *testing.T, a, b []byte, bs uint8) {
		if len(a) > 512 || len(b) > 512 {
			t.Skip("inputs above 512 bytes add nothing the model can check quickly")
		}
		checkAgainstModel(t, mapFromBytes(a), mapFromBytes(b), int64(bs%64)+1)
	})
}

// FuzzDecodeMap feeds arbitrary bytes to the strict decoder: it must never
// panic, never allocate more than the input justifies, return only canonical
// maps, and accept only the one encoding of each map.
func FuzzDecodeMap(f *testing.F) {
	for _, seed := range [][]byte{
		{1, 0, 0},
		{1, 0x81, 0xad, 0xe2, 0x04, 3, 0, 0x80, 0x20, 0x80, 0x20, 1, 0xfe, 0xec, 0xe1, 0x04, 2},
		{1, 10, 2, 0, 1, 1, 1},
		{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 0, 1},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := DecodeMap(in)
		if err != nil {
			return
		}
		if err := Validate(m.Size(), m.Extents()); err != nil {
			t.Fatalf("decoded a non-canonical map %v: %v", m, err)
		}
		if cap(m.Extents()) > len(in)/2 {
			t.Fatalf("allocated %d extents for %d input bytes", cap(m.Extents()), len(in))
		}
		out, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("re-encoding %v gave %x, input was %x", m, out, in)
		}
	})
}
