package sparse

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func ext(pairs ...int64) []Extent {
	var out []Extent
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, Extent{pairs[i], pairs[i+1] - pairs[i]})
	}
	return out
}

func mustMap(t testing.TB, size int64, pairs ...int64) Map {
	t.Helper()
	m, err := FromExtents(size, ext(pairs...))
	require.NoError(t, err)
	return m
}

func TestNewMapNormalizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int64
		in   []Extent
		want []Extent
	}{
		{"empty", 10, nil, nil},
		{"unsorted", 100, ext(50, 60, 0, 10), ext(0, 10, 50, 60)},
		{"overlapping", 100, ext(0, 30, 20, 40), ext(0, 40)},
		{"touching", 100, ext(0, 10, 10, 20), ext(0, 20)},
		{"contained", 100, ext(0, 50, 10, 20), ext(0, 50)},
		{"empty extents dropped", 100, []Extent{{5, 0}, {7, 3}}, ext(7, 10)},
		{"whole", 100, ext(0, 100), ext(0, 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMap(tc.size, tc.in...)
			require.NoError(t, err)
			require.Equal(t, tc.want, m.Extents())
			require.NoError(t, Validate(m.Size(), m.Extents()))
		})
	}
}

func TestValidateRejects(t *testing.T) {
	const maxInt = int64(^uint64(0) >> 1)
	for _, tc := range []struct {
		name string
		size int64
		in   []Extent
		want error
	}{
		{"negative size", -1, nil, ErrOutOfRange},
		{"zero length", 10, []Extent{{1, 0}}, ErrOutOfRange},
		{"negative offset", 10, []Extent{{-1, 2}}, ErrOutOfRange},
		{"past size", 10, ext(5, 11), ErrOutOfRange},
		{"overflow", maxInt, []Extent{{maxInt - 1, 5}}, ErrOutOfRange},
		{"overlap", 100, ext(0, 10, 5, 20), ErrOutOfOrder},
		{"unsorted", 100, ext(50, 60, 0, 10), ErrOutOfOrder},
		{"touching", 100, ext(0, 10, 10, 20), ErrNotCoalesced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.size, tc.in)
			require.ErrorIs(t, err, tc.want)
			require.ErrorIs(t, err, ErrInvalidMap)
			_, err = FromExtents(tc.size, tc.in)
			require.Error(t, err)
		})
	}
	_, err := NewMap(10, ext(5, 11)...)
	require.ErrorIs(t, err, ErrOutOfRange)
	require.Contains(t, err.Error(), "extent 0")
}

func TestSetOperations(t *testing.T) {
	a := mustMap(t, 100, 0, 10, 20, 30, 50, 80)
	b := mustMap(t, 120, 5, 25, 60, 70, 90, 110)
	require.Equal(t, ext(0, 30, 50, 80, 90, 110), a.Union(b).Extents())
	require.Equal(t, int64(120), a.Union(b).Size())
	require.Equal(t, ext(5, 10, 20, 25, 60, 70), a.Intersect(b).Extents())
	require.Equal(t, ext(0, 5, 25, 30, 50, 60, 70, 80), a.Difference(b).Extents())
	require.Equal(t, ext(10, 20, 30, 50, 80, 100), a.Holes().Extents())
	require.Equal(t, int64(50), a.Bytes())
	require.Equal(t, ext(0, 100), Map{size: 100}.Holes().Extents())
	require.Empty(t, mustMap(t, 100, 0, 100).Holes().Extents())
	require.Empty(t, Map{}.Holes().Extents())
	require.True(t, a.Contains(0) && a.Contains(9) && !a.Contains(10) && a.Contains(79) && !a.Contains(80))
	require.Equal(t, ext(0, 10, 20, 30, 50, 60), a.Resize(60).Extents())
	require.Equal(t, int64(60), a.Resize(60).Size())
	require.Equal(t, "size=100 [0,10) [20,30) [50,80)", a.String())
	require.True(t, a.Equal(mustMap(t, 100, 0, 10, 20, 30, 50, 80)))
	require.False(t, a.Equal(a.Resize(101)))
}

func TestRounding(t *testing.T) {
	// size 10,000,001 with data at unaligned places: the last block is short.
	m := mustMap(t, 10_000_001, 1, 2, 4095, 4097, 8192, 12288, 9_999_999, 10_000_001)
	require.Equal(t, ext(0, 12288, 9_998_336, 10_000_001), m.RoundOut(4096).Extents())
	require.Equal(t, ext(8192, 12288, 9_998_336, 10_000_001), mustMap(t, 10_000_001, 8000, 12288, 9_998_000, 10_000_001).RoundIn(4096).Extents())
	require.Empty(t, mustMap(t, 100, 10, 20).RoundIn(64).Extents())
	// round in keeps a short last block when the extent reaches the size.
	require.Equal(t, ext(64, 100), mustMap(t, 100, 10, 100).RoundIn(64).Extents())
	// near int64 limits nothing overflows.
	const maxInt = int64(^uint64(0) >> 1)
	big := mustMap(t, maxInt, maxInt-10, maxInt-5)
	require.Equal(t, []Extent{{maxInt - maxInt%4096, maxInt % 4096}}, big.RoundOut(4096).Extents())
	require.Empty(t, big.RoundIn(4096).Extents())
}

func TestBlocks(t *testing.T) {
	m := mustMap(t, 10_000, 100, 5000, 8190, 10_000)
	var got []Extent
	for b := range m.Blocks(4096) {
		got = append(got, b)
	}
	require.Equal(t, ext(100, 4096, 4096, 5000, 8190, 8192, 8192, 10_000), got)
	// stops when the consumer does
	n := 0
	for range m.RoundOut(1).Blocks(1) {
		n++
		if n == 3 {
			break
		}
	}
	require.Equal(t, 3, n)
	require.Panics(t, func() { m.Blocks(0) })
}

// bitmap is the naive model the fuzz and property tests compare against.
type bitmap []bool

func toBitmap(m Map) bitmap {
	b := make(bitmap, m.Size())
	for _, e := range m.Extents() {
		for i := e.Off; i < e.End(); i++ {
			b[i] = true
		}
	}
	return b
}

func (b bitmap) toExtents() []Extent {
	var out []Extent
	for i := 0; i < len(b); {
		if !b[i] {
			i++
			continue
		}
		j := i
		for j < len(b) && b[j] {
			j++
		}
		out = append(out, Extent{int64(i), int64(j - i)})
		i = j
	}
	return out
}

func modelOp(a, b bitmap, op func(x, y bool) bool) bitmap {
	out := make(bitmap, max(len(a), len(b)))
	for i := range out {
		out[i] = op(i < len(a) && a[i], i < len(b) && b[i])
	}
	return out
}

func modelRoundOut(a bitmap, bs int) bitmap {
	out := make(bitmap, len(a))
	for s := 0; s < len(a); s += bs {
		e := min(s+bs, len(a))
		if slices.Contains(a[s:e], true) {
			for i := s; i < e; i++ {
				out[i] = true
			}
		}
	}
	return out
}

func modelRoundIn(a bitmap, bs int) bitmap {
	out := make(bitmap, len(a))
	for s := 0; s < len(a); s += bs {
		e := min(s+bs, len(a))
		if !slices.Contains(a[s:e], false) {
			for i := s; i < e; i++ {
				out[i] = true
			}
		}
	}
	return out
}

// modelResize cuts a at n or extends it with holes.
func modelResize(a bitmap, n int) bitmap {
	out := make(bitmap, n)
	copy(out, a)
	return out
}

// checkAgainstModel asserts every operation on a and b agrees with the bitmap model.
func checkAgainstModel(t testing.TB, a, b Map, bs int64) {
	t.Helper()
	ma, mb := toBitmap(a), toBitmap(b)
	cases := []struct {
		name string
		got  Map
		want bitmap
	}{
		{"union", a.Union(b), modelOp(ma, mb, func(x, y bool) bool { return x || y })},
		{"intersect", a.Intersect(b), modelOp(ma, mb, func(x, y bool) bool { return x && y })},
		{"difference", a.Difference(b), modelOp(ma, mb, func(x, y bool) bool { return x && !y })},
		{"holes", a.Holes(), modelOp(ma, nil, func(x, _ bool) bool { return !x })},
		{"roundout", a.RoundOut(bs), modelRoundOut(ma, int(bs))},
		{"roundin", a.RoundIn(bs), modelRoundIn(ma, int(bs))},
	}
	// Resize to every extent boundary of a (where an off-by-one emits an
	// empty extent), to zero, and past the end.
	sizes := []int64{0, a.Size(), a.Size() + 5, a.Size() / 2}
	for _, e := range a.Extents() {
		sizes = append(sizes, e.Off, e.End(), e.Off+1)
	}
	for _, n := range sizes {
		cases = append(cases, struct {
			name string
			got  Map
			want bitmap
		}{fmt.Sprintf("resize(%d)", n), a.Resize(n), modelResize(ma, int(n))})
	}
	for _, c := range cases {
		if err := Validate(c.got.Size(), c.got.Extents()); err != nil {
			t.Fatalf("%s(%v, %v) not canonical: %v", c.name, a, b, err)
		}
		if int64(len(c.want)) != c.got.Size() || !slices.Equal(c.got.Extents(), c.want.toExtents()) {
			t.Fatalf("%s(%v, %v) = %v, model says %v", c.name, a, b, c.got, c.want.toExtents())
		}
	}
	var bytes int64
	for _, v := range ma {
		if v {
			bytes++
		}
	}
	if a.Bytes() != bytes {
		t.Fatalf("Bytes(%v) = %d, model %d", a, a.Bytes(), bytes)
	}
	var pieces []Extent
	for p := range a.Blocks(bs) {
		if p.Off/bs != (p.End()-1)/bs {
			t.Fatalf("Blocks(%d) piece %v crosses a block boundary", bs, p)
		}
		if n := len(pieces); n > 0 && pieces[n-1].End() == p.Off {
			pieces[n-1].Len += p.Len
		} else {
			pieces = append(pieces, p)
		}
	}
	if !slices.Equal(pieces, a.Extents()) {
		t.Fatalf("Blocks(%d) of %v rejoined to %v", bs, a, pieces)
	}
	for i := range ma {
		if a.Contains(int64(i)) != ma[i] {
			t.Fatalf("Contains(%d) of %v = %v", i, a, !ma[i])
		}
	}
}

// mapFromBytes builds a small map from fuzz or random bytes: a size, then
// (gap, length) pairs.
func mapFromBytes(data []byte) Map {
	if len(data) == 0 {
		return Map{}
	}
	size := int64(data[0]) * 3
	var ext []Extent
	pos := int64(0)
	for i := 1; i+1 < len(data); i += 2 {
		off := pos + int64(data[i]%16)
		l := int64(data[i+1]%24) + 1
		if off+l > size {
			break
		}
		ext = append(ext, Extent{off, l})
		pos = off + l
	}
	m, err := NewMap(size, ext...)
	if err != nil {
		panic(err)
	}
	return m
}

func TestOperationsAgainstModel(t *testing.T) {
	seeds := [][2][]byte{
		{{10, 0, 5, 3, 7}, {12, 2, 2, 1, 1, 0, 9}},
		{{0}, {40, 0, 23}},
		{{80, 15, 23, 15, 23, 15, 23}, {80, 0, 0, 0, 0, 0, 0}},
	}
	for _, s := range seeds {
		for _, bs := range []int64{1, 3, 4, 16, 4096} {
			checkAgainstModel(t, mapFromBytes(s[0]), mapFromBytes(s[1]), bs)
		}
	}
}

func TestErrorsAreTyped(t *testing.T) {
	err := Validate(10, ext(0, 4, 4, 8))
	var me *mapError
	require.True(t, errors.As(err, &me))
	require.Equal(t, 1, me.index)
}
