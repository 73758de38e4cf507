package wire

import (
	"encoding/binary"
	"testing"

	"github.com/sparsesync/sparsesync/sparse"
	"github.com/stretchr/testify/require"
)

// TestParseWindowRefuses: a WINDOW from the peer must start where the last
// one ended, end after it (within the bound, at a block boundary unless at
// the bound) and hold extents only there, in a map of its end's size.
func TestParseWindowRefuses(t *testing.T) {
	const bs = 4096
	frame := func(lo, hi uint64, m []byte) []byte {
		b := binary.LittleEndian.AppendUint64(nil, lo)
		return append(binary.LittleEndian.AppendUint64(b, hi), m...)
	}
	enc := func(size int64, xs ...sparse.Extent) []byte {
		m, err := sparse.NewMap(size, xs...)
		require.NoError(t, err)
		b, err := m.MarshalBinary()
		require.NoError(t, err)
		return b
	}
	ok := frame(8192, 16384, enc(16384, sparse.Extent{Off: 8192, Len: 100}))
	hi, ext, err := ParseWindow(ok, 8192, 1<<20, bs)
	require.NoError(t, err)
	require.Equal(t, int64(16384), hi)
	require.Equal(t, []sparse.Extent{{Off: 8192, Len: 100}}, ext)
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"not where the last ended", frame(4096, 16384, enc(16384))},
		{"overlapping the last", frame(0, 16384, enc(16384))},
		{"empty", frame(8192, 8192, enc(8192))},
		{"past the bound", frame(8192, 2<<20, enc(2<<20))},
		{"not at a block boundary", frame(8192, 10000, enc(10000))},
		{"map of another size", frame(8192, 16384, enc(20480))},
		{"extent before the window", frame(8192, 16384, enc(16384, sparse.Extent{Off: 4096, Len: 8192}))},
		{"no map", frame(8192, 16384, nil)},
		{"truncated", ok[:10]},
		{"map claims more extents than bytes", frame(8192, 16384, []byte{1, 0x80, 0x80, 1, 0xff, 0xff, 0x03})},
	} {
		_, _, err := ParseWindow(tc.body, 8192, 1<<20, bs)
		require.ErrorIs(t, err, ErrProtocol, tc.name)
	}
}
