package sparse

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSameBlocks(t *testing.T) {
	const size = 1 << 20
	rec := func(log, phys, n int64) FiemapExtent {
		return FiemapExtent{Logical: log, Physical: phys, Length: n, Flags: FiemapShared}
	}
	cases := []struct {
		name string
		a, b []FiemapExtent
		want []Extent
	}{
		{name: "same blocks", a: []FiemapExtent{rec(0, 1<<30, 64<<10)}, b: []FiemapExtent{rec(0, 1<<30, 64<<10)},
			want: []Extent{{0, 64 << 10}}},
		// Each file shares with some other file (a snapshot, a backup):
		// shared on both sides, at the same offsets, but other blocks.
		{name: "shared with third files", a: []FiemapExtent{rec(0, 1<<30, 64<<10)}, b: []FiemapExtent{rec(0, 2<<30, 64<<10)}},
		// The same physical blocks at another file offset hold the same
		// bytes, but not where the other file has them.
		{name: "same blocks, other offset", a: []FiemapExtent{rec(0, 1<<30, 64<<10)}, b: []FiemapExtent{rec(4096, 1<<30, 64<<10)}},
		{name: "partial overlap", a: []FiemapExtent{rec(0, 1<<30, 64<<10)}, b: []FiemapExtent{rec(32<<10, 1<<30+32<<10, 64<<10)},
			want: []Extent{{32 << 10, 32 << 10}}},
		// b's one record spans two of a's, only the second of which is
		// the same blocks.
		{name: "split records", a: []FiemapExtent{rec(0, 5<<30, 16<<10), rec(16<<10, 1<<30+16<<10, 48<<10)},
			b:    []FiemapExtent{rec(0, 1<<30, 64<<10)},
			want: []Extent{{16 << 10, 48 << 10}}},
		{name: "adjacent merge", a: []FiemapExtent{rec(0, 1<<30, 16<<10), rec(16<<10, 1<<30+16<<10, 16<<10)},
			b:    []FiemapExtent{rec(0, 1<<30, 32<<10)},
			want: []Extent{{0, 32 << 10}}},
		{name: "clipped to size", a: []FiemapExtent{rec(size-4096, 1<<30, 64<<10)}, b: []FiemapExtent{rec(size-4096, 1<<30, 64<<10)},
			want: []Extent{{size - 4096, 4096}}},
		{name: "empty side", a: []FiemapExtent{rec(0, 1<<30, 64<<10)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := SameBlocks(size, tc.a, tc.b)
			require.NoError(t, err)
			require.Equal(t, tc.want, m.Extents())
			m, err = SameBlocks(size, tc.b, tc.a)
			require.NoError(t, err)
			require.Equal(t, tc.want, m.Extents(), "not symmetric")
		})
	}
}
