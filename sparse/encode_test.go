package sparse

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEncodeKnownAnswer(t *testing.T) {
	m := mustMap(t, 10_000_001, 0, 4096, 8192, 8193, 9_999_999, 10_000_001)
	b, err := m.MarshalBinary()
	require.NoError(t, err)
	want := []byte{
		1,                      // version
		0x81, 0xad, 0xe2, 0x04, // size 10,000,001
		3,             // count
		0, 0x80, 0x20, // gap 0, length 4096
		0x80, 0x20, 1, // gap 4096, length 1
		0xfe, 0xec, 0xe1, 0x04, 2, // gap 9,991,806, length 2
	}
	require.Equal(t, want, b)
	var got Map
	require.NoError(t, got.UnmarshalBinary(b))
	require.True(t, m.Equal(got))

	empty, err := Map{}.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, []byte{1, 0, 0}, empty)
}

func TestDecodeStrict(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"version", []byte{2, 0, 0}, ErrMalformed},
		{"truncated size", []byte{1, 0x80}, ErrTruncated},
		{"trailing", []byte{1, 0, 0, 0}, ErrMalformed},
		{"non-minimal", []byte{1, 0x80, 0x00, 0}, ErrMalformed},
		{"count too big", []byte{1, 10, 200, 1}, ErrTruncated},
		{"huge count", []byte{1, 10, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 1}, ErrTruncated},
		{"zero length", []byte{1, 10, 1, 0, 0}, ErrOutOfRange},
		{"past size", []byte{1, 10, 1, 5, 6}, ErrOutOfRange},
		{"zero gap", []byte{1, 10, 2, 0, 1, 0, 1}, ErrNotCoalesced},
		{"size overflow", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0}, ErrOutOfRange},
		{"varint overflow", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0}, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeMap(tc.in)
			require.ErrorIs(t, err, tc.want)
			require.ErrorIs(t, err, ErrInvalidMap)
		})
	}
}
