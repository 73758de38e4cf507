package sparse

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSpans: neighbours less than ReadGap apart share a read while it
// stays within most; a wider hole, or a read that would pass most, starts
// another; an extent longer than most is cut into pieces of most.
func TestSpans(t *testing.T) {
	const k = 1 << 10
	ext := []Extent{
		{0, 4 * k}, {8 * k, 4 * k}, {16 * k, 4 * k}, // joined
		{16*k + 4*k + ReadGap + 1, 4 * k}, // a hole one byte too wide
		{100 * k, 500 * k},                // near it, but one read would pass most
		{1000 * k, 600 * k},               // cut
	}
	got := Spans(ext, 512*k)
	require.Equal(t, []Span{
		{Off: 0, End: 20 * k, Ext: ext[:3]},
		{Off: ext[3].Off, End: ext[3].End(), Ext: ext[3:4]},
		{Off: 100 * k, End: 600 * k, Ext: ext[4:5]},
		{Off: 1000 * k, End: 1512 * k, Ext: []Extent{{1000 * k, 512 * k}}},
		{Off: 1512 * k, End: 1600 * k, Ext: []Extent{{1512 * k, 88 * k}}},
	}, got)
	for _, s := range got {
		require.LessOrEqual(t, s.End-s.Off, int64(512*k))
	}
	require.Equal(t, int64(12*k), got[0].Data(), "the data of a span, not its holes")
	require.Empty(t, Spans(nil, 512*k))
}
