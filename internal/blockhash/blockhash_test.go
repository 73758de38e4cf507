package blockhash

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/sparse"
)

func TestSumMatchesXXHash(t *testing.T) {
	h := New(0)
	for _, s := range []string{"", "a", "hello world", string(make([]byte, 4096))} {
		require.Equal(t, xxhash.Sum64String(s), h.Sum([]byte(s)), "%q", s)
	}
	require.NotEqual(t, New(1).Sum([]byte("abc")), New(2).Sum([]byte("abc")), "seed must change the hash")
}

func TestWalkBlocksAnyBufferSize(t *testing.T) {
	data := make([]byte, 10_001)
	for i := range data {
		data[i] = byte(i * 7)
	}
	m, err := sparse.NewMap(int64(len(data)), sparse.Extent{Off: 100, Len: 50}, sparse.Extent{Off: 5000, Len: 5001})
	require.NoError(t, err)
	type blk struct {
		off int64
		sum uint64
	}
	var want []blk
	h := New(42)
	for _, off := range []int64{0, 4096, 8192} {
		want = append(want, blk{off, h.Sum(data[off:min(off+4096, int64(len(data)))])})
	}
	for _, bufSize := range []int{4096, 5000, 8192, 1 << 20} {
		var got []blk
		err := h.Walk(t.Context(), bytes.NewReader(data), m, 4096, make([]byte, bufSize), func(off int64, b []byte, sum uint64) error {
			require.Equal(t, data[off:off+int64(len(b))], b)
			got = append(got, blk{off, sum})
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, want, got, "buffer %d", bufSize)
	}
	err = h.Walk(t.Context(), bytes.NewReader(data[:6000]), m, 4096, make([]byte, 4096), func(int64, []byte, uint64) error { return nil })
	require.True(t, errors.Is(err, io.ErrUnexpectedEOF), "short source must be an error, got %v", err)
	require.Error(t, h.Walk(t.Context(), bytes.NewReader(data), m, 4096, make([]byte, 100), nil))
}
