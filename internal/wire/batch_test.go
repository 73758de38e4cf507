package wire

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBatchParse: a BATCH head as the sender writes it parses back to its
// ranges and payload; one whose ranges add up to more than a DATA
// payload, or that claims more ranges than its body holds, is refused.
func TestBatchParse(t *testing.T) {
	rs := []Range{{0, 4096}, {8192, 4096}, {1 << 30, 100}}
	body := append(AppendBatchHead(nil, rs), "payload"...)
	var b BatchBody
	require.NoError(t, b.Parse(body, 1<<31))
	require.Equal(t, rs, b.Ranges)
	require.Equal(t, []byte("payload"), b.Payload)
	require.Equal(t, 8292, b.RawLen)
	require.ErrorIs(t, b.Parse(body, 1<<30), ErrProtocol, "a range past the size")

	var big []Range
	for i := range MaxBatchRanges {
		big = append(big, Range{int64(i) << 20, 8192})
	}
	require.ErrorIs(t, b.Parse(AppendBatchHead(nil, big), 1<<40), ErrProtocol, "more than a payload's bytes")
	require.ErrorIs(t, b.Parse(AppendBatchHead(nil, rs)[:2+12*2], 1<<40), ErrProtocol, "a head shorter than its count")
	require.ErrorIs(t, b.Parse([]byte{1}, 1<<40), ErrProtocol, "no room for the count")
}
