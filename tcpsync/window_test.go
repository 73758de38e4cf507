package tcpsync

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// clipMap returns m's extents in [lo, hi).
func clipMap(m sparse.Map, lo, hi int64) []sparse.Extent {
	var out []sparse.Extent
	for _, e := range m.Extents() {
		a, b := max(e.Off, lo), min(e.End(), hi)
		if b > a {
			out = append(out, sparse.Extent{Off: a, Len: b - a})
		}
	}
	return out
}

func randomMap(r *rand.Rand, size int64) sparse.Map {
	var xs []sparse.Extent
	for off := int64(r.IntN(3) * 1024); off < size; {
		n := min(int64(1+r.IntN(24))*1024, size-off)
		xs = append(xs, sparse.Extent{Off: off, Len: n})
		off += n + int64(1+r.IntN(24))*1024
	}
	m, _ := sparse.NewMap(size, xs...)
	return m
}

// TestWindowPlansAddUpToThePlan: the plans of any cut of the file into
// windows at block boundaries (windowPlan, from each side's piece) hold
// together exactly what the whole file's plan holds: the same data blocks,
// the same compare blocks, the same punches, whatever the two sizes (the
// destination's unaligned end, a longer or shorter destination). Compare
// and send semantics do not depend on where windows end.
func TestWindowPlansAddUpToThePlan(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 1))
	for i := range 400 {
		bs := int64(4096) << r.IntN(2)
		size := int64(1+r.IntN(300)) * 1024
		dsize := int64(r.IntN(300)) * 1024
		if r.IntN(4) == 0 {
			dsize = size
		}
		if r.IntN(5) == 0 {
			dsize += int64(r.IntN(4096))
		}
		src, dst := randomMap(r, size), randomMap(r, dsize)
		whole, err := newPlan(src, dst, bs)
		require.NoError(t, err)
		cuts := []int64{size}
		for range r.IntN(6) {
			if c := int64(r.IntN(int(size/bs)+1)) * bs; c > 0 && c < size {
				cuts = append(cuts, c)
			}
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		var blocks, punch, cmp []sparse.Extent
		var data, cmpBytes int64
		lo := int64(0)
		for _, hi := range cuts {
			p, err := windowPlan(clipMap(src, lo, hi), clipMap(dst, lo, min(hi, dsize)), sparse.Map{}, dsize, lo, hi, bs)
			require.NoError(t, err, "case %d window [%d,%d)", i, lo, hi)
			blocks = append(blocks, p.blocks.Extents()...)
			punch = append(punch, p.punch.Extents()...)
			cmp = append(cmp, p.cmp...)
			data += p.dataBytes
			cmpBytes += p.cmpBytes
			lo = hi
		}
		join := func(xs []sparse.Extent) sparse.Map {
			m, err := sparse.NewMap(size, xs...)
			require.NoError(t, err)
			return m
		}
		cmpWhole, _ := sparse.NewMap(size, whole.cmp...)
		msg := []any{"case %d: bs %d, size %d, destination %d, cuts %v", i, bs, size, dsize, cuts}
		require.Equal(t, whole.blocks.Extents(), join(blocks).Extents(), msg...)
		require.Equal(t, whole.punch.Extents(), join(punch).Extents(), msg...)
		require.Equal(t, cmpWhole.Extents(), join(cmp).Extents(), msg...)
		require.Equal(t, whole.dataBytes, data, msg...)
		require.Equal(t, whole.cmpBytes, cmpBytes, msg...)
	}
}

// TestCollectWindow: a window closes at the first block boundary after
// its extents' encoding passes the budget (extents crossing it clipped),
// the next one starts there, and together they hold the map; each fits a
// WINDOW frame.
func TestCollectWindow(t *testing.T) {
	const bs = 4096
	var xs []sparse.Extent
	for i := range 40_000 {
		xs = append(xs, sparse.Extent{Off: int64(i)*3000 + 100, Len: 1000}) // some cross block boundaries
	}
	m, err := sparse.NewMap(40_000*3000, xs...)
	require.NoError(t, err)
	walk := mapWalk(m)
	var got []sparse.Extent
	windows := 0
	for lo := int64(0); lo < m.Size(); windows++ {
		ext, hi, err := collectWindow(t.Context(), walk, lo, m.Size(), bs)
		require.NoError(t, err)
		require.Greater(t, hi, lo)
		require.True(t, hi%bs == 0 || hi == m.Size(), "window end %d", hi)
		require.LessOrEqual(t, wire.WindowMapLen(ext, hi), wire.MaxWindowMap)
		for _, e := range ext {
			require.True(t, e.Off >= lo && e.End() <= hi, "extent %v in [%d,%d)", e, lo, hi)
		}
		got = append(got, ext...)
		lo = hi
	}
	require.Greater(t, windows, 3, "the map takes several windows")
	joined, err := sparse.NewMap(m.Size(), got...)
	require.NoError(t, err)
	require.Equal(t, m.Extents(), joined.Extents())
}

// TestHostileWindowsRefused: a client that speaks windows by hand and
// breaks their rules (data before any window, a window that does not start
// where the last ended, overlaps it, comes before the last one's chunks are
// settled or after the last one, runs past the size, or does not fit a
// frame) ends its session with a protocol error.
func TestHostileWindowsRefused(t *testing.T) {
	addr, _ := startServer(t, t.TempDir(), nil)
	const size, bs = 1 << 20, 4096
	win := func(lo, hi int64, xs ...sparse.Extent) []byte {
		b, err := wire.WindowFrame(lo, hi, xs)
		require.NoError(t, err)
		return b
	}
	type step struct {
		t    wire.Type
		body []byte
	}
	data := binary.LittleEndian.AppendUint64(nil, 0)
	data = binary.LittleEndian.AppendUint32(data, 4096)
	data = append(data, make([]byte, 4096)...)
	for _, tc := range []struct {
		name  string
		steps []step
		want  error
	}{
		{"data before any window", []step{{wire.Data, data}}, ErrProtocol},
		{"window not at the start", []step{{wire.Window, win(4096, size)}}, ErrProtocol},
		{"window past the size", []step{{wire.Window, win(0, 2*size)}}, ErrProtocol},
		{"overlapping window", []step{{wire.Window, win(0, 65536)}, {wire.Window, win(0, 131072)}}, ErrProtocol},
		{"window skipping ahead", []step{{wire.Window, win(0, 65536)}, {wire.Window, win(131072, size)}}, ErrProtocol},
		{"window before the last one settled", []step{{wire.Window, win(0, 65536, sparse.Extent{Off: 0, Len: 4096})},
			{wire.Window, win(65536, size)}}, ErrProtocol},
		{"window after the last", []step{{wire.Window, win(0, size)}, {wire.Window, win(size, size+4096)}}, ErrProtocol},
		{"window over a frame", []step{{wire.Window, make([]byte, wire.MaxFrame+1)}}, ErrFrameTooLarge},
		{"window map over its limit", []step{{wire.Window, append(win(0, size), make([]byte, wire.MaxWindowMap)...)}}, ErrProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := rawSessionWith(t, addr, testToken, false)
			require.True(t, f.windows)
			require.NoError(t, f.send(wire.Open, 0, openBody(opPush, 0, bs, "w")))
			_, _, err := f.expect(wire.Opened)
			require.NoError(t, err)
			require.NoError(t, f.send(wire.SrcInfo, 0, binary.LittleEndian.AppendUint64(srcInfoBody(size, bs, ""), 4096)))
			_, _, err = f.expect(wire.DstInfo)
			require.NoError(t, err)
			for i, s := range tc.steps {
				require.NoError(t, sendAnySize(f, s.t, s.body))
				if i < len(tc.steps)-1 {
					_, _, err = f.expect(wire.Window) // the server's answer to a valid window
					require.NoError(t, err)
				}
			}
			err = readUntilError(f)
			var re *RemoteError
			require.ErrorAs(t, err, &re, "the server says why")
			require.ErrorIs(t, err, tc.want)
		})
	}
}
