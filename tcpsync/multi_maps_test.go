package tcpsync

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// writeManyExtents writes a file of n data extents of 4 KiB, one every
// 8 KiB, its bytes derived from their offsets.
func writeManyExtents(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 4096)
	for i := range n {
		off := int64(i) * 8192
		layout.Pattern(buf, off)
		_, err := f.WriteAt(buf, off)
		require.NoError(t, err)
	}
	require.NoError(t, f.Truncate(int64(n)*8192+1000))
}

// patientOpts is multiOpts with an idle timeout no load reaches: these
// tests drop no source for being slow.
func patientOpts() *Options {
	o := multiOpts()
	o.IdleTimeout = 5 * time.Minute
	return o
}

// TestMultiPieceMapsOverBudget: a multi-source pull of a file whose map is
// over what the client's session budget (1 MiB here) could hold whole.
// A client that plays an older peer (whole maps) is refused by its budget
// at every source; between current peers no whole map crosses and the
// pull completes, exact in bytes and in the kernel's hole map. A second
// pull over a changed target moves the changed block only and punches the
// data put in a hole; an atomic one, read back, too.
func TestMultiPieceMapsOverBudget(t *testing.T) {
	root := t.TempDir()
	const n = 12_000
	src := filepath.Join(root, "disk.img")
	writeManyExtents(t, src, n)
	require.Greater(t, int64(n)*extentCost, int64(1<<20), "the map whole is over the budget")
	a, _ := startServer(t, root, nil)
	b, _ := startServer(t, root, nil)
	dir := t.TempDir()

	old := patientOpts()
	old.hooks = &testHooks{sessionMemory: 1 << 20, noWindows: true}
	_, err := PullMulti(t.Context(), sourcesOf(a, b), filepath.Join(dir, "old.img"), old)
	require.ErrorIs(t, err, ErrNoSource)
	require.ErrorContains(t, err, "memory budget")

	o := patientOpts()
	o.hooks = &testHooks{sessionMemory: 1 << 20}
	dst := filepath.Join(dir, "copy.img")
	st, err := PullMulti(t.Context(), sourcesOf(a, b), dst, o)
	require.NoError(t, err)
	require.True(t, st.Verified)
	requireSame(t, src, dst)
	require.Equal(t, int64(n)*4096, st.CopiedBytes)
	require.Equal(t, int64(n)*4096, st.DataBytes)
	pieces := 0
	for _, s := range st.Sources {
		require.Empty(t, s.Dropped)
		pieces += s.Pieces
	}
	require.Equal(t, (n*4096+pieceBytes-1)/pieceBytes, pieces)

	// A changed block, and data where the source has a hole.
	f, err := os.OpenFile(dst, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("changed"), 5000*8192+10)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 4096), 7000*8192+4096) // zeros, but allocated
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("junk"), 9000*8192+4096)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	for _, atomic := range []bool{false, true} {
		o.Atomic = atomic
		st, err = PullMulti(t.Context(), sourcesOf(a, b), dst, o)
		require.NoError(t, err, "atomic %v", atomic)
		requireSame(t, src, dst)
		if !atomic {
			require.Equal(t, int64(4096), st.CopiedBytes, "the changed block only")
			require.Equal(t, int64(n-1)*4096, st.UnchangedBytes)
			require.Equal(t, int64(2*4096), st.PunchedBytes, "the data in the holes")
		} else {
			require.True(t, st.ReadBack)
			require.Equal(t, int64(n)*4096, st.ReadBackBytes)
			require.Zero(t, st.CopiedBytes)
		}
	}
}

// TestMultiPieceMapHostile: a source whose maps of the pieces are out of
// their range, hold a block more than their manifest lines, are larger
// than a WINDOW frame may carry, or are other maps of the same blocks, is
// refused at its first piece (the first three as protocol violations,
// before anything of the piece is written; the last by the piece's sum),
// and the pull completes from the other source.
func TestMultiPieceMapHostile(t *testing.T) {
	const bs = 4096
	cases := []struct {
		name  string
		remap func(lo, hi int64, ext []sparse.Extent) []byte
		want  error
		says  string // this side's refusal, not the source's own checks
	}{
		{"out of range", func(lo, hi int64, ext []sparse.Extent) []byte {
			b, _ := wire.WindowFrame(lo, hi+bs, append(ext, sparse.Extent{Off: hi, Len: bs}))
			return b
		}, ErrProtocol, "WINDOW ["},
		{"a block more", func(lo, hi int64, ext []sparse.Extent) []byte {
			more := append([]sparse.Extent{ext[0], {Off: ext[0].End(), Len: bs}}, ext[1:]...)
			b, _ := wire.WindowFrame(lo, hi, more)
			return b
		}, ErrProtocol, "holds 1025 blocks, its manifest line 1024"},
		{"oversized", func(lo, hi int64, _ []sparse.Extent) []byte { // over wire.MaxWindowMap, within a frame
			var xs []sparse.Extent
			for o := lo; o+2 <= hi && len(xs) < 20_000; o += 64 {
				xs = append(xs, sparse.Extent{Off: o, Len: 1})
			}
			b, _ := wire.WindowFrame(lo, hi, xs)
			return b
		}, ErrProtocol, "WINDOW map of"},
		{"another map", func(lo, hi int64, ext []sparse.Extent) []byte {
			other := append([]sparse.Extent{{Off: ext[0].Off, Len: ext[0].Len - 100}}, ext[1:]...)
			b, _ := wire.WindowFrame(lo, hi, other)
			return b
		}, ErrPieceMismatch, "piece"},
	}
	root := t.TempDir()
	writeManyExtents(t, filepath.Join(root, "disk.img"), 3072) // three pieces, an extent every 8 KiB
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The honest source holds its pieces (at most two at a time)
			// until the hostile one has sent a map: it gets one.
			asked := make(chan struct{})
			var once sync.Once
			a, _ := startServer(t, root, func(s *Server) {
				s.fetchHooks = &fetchHooks{piece: func(ctx context.Context, k int, _ []byte) {
					if k >= 0 {
						select {
						case <-asked:
						case <-ctx.Done():
						}
					}
				}}
			})
			b, _ := startServer(t, root, func(s *Server) {
				s.fetchHooks = &fetchHooks{pieceMap: func(k int, body []byte) []byte {
					defer once.Do(func() { close(asked) })
					lo, hi := int64(binary.LittleEndian.Uint64(body)), int64(binary.LittleEndian.Uint64(body[8:]))
					_, ext, err := wire.ParseWindow(body, lo, hi, bs)
					if err != nil {
						panic(err)
					}
					return c.remap(lo, hi, ext)
				}}
			})
			dst := filepath.Join(t.TempDir(), "copy.img")
			srcs := sourcesOf(b, a)
			srcs[0].Anchor = true // it states the agreed manifest: only its maps are wrong
			st, err := PullMulti(t.Context(), srcs, dst, patientOpts())
			require.NoError(t, err)
			requireSame(t, filepath.Join(root, "disk.img"), dst)
			require.ErrorIs(t, st.Sources[0].Err, c.want)
			require.ErrorContains(t, st.Sources[0].Err, c.says)
			require.NotEmpty(t, st.Sources[0].Dropped)
			require.Zero(t, st.Sources[0].Pieces)
			require.Equal(t, 3, st.Sources[1].Pieces)
		})
	}
}

// TestMultiOlderPeer: a client that plays an older peer (whole maps and
// the manifest of sums only) pulls as before, and a re-pull moves nothing.
func TestMultiOlderPeer(t *testing.T) {
	a, root, _ := fetchServer(t, nil)
	b, _, _ := fetchServer(t, nil)
	o := patientOpts()
	o.hooks = &testHooks{noWindows: true}
	dst := filepath.Join(t.TempDir(), "copy.img")
	for range 2 {
		st, err := PullMulti(t.Context(), sourcesOf(a, b), dst, o)
		require.NoError(t, err)
		require.True(t, st.Verified)
		requireSame(t, filepath.Join(root, "disk.img"), dst)
	}
}

// TestMultiMixedVersions: sources that speak the fetch with piece maps and
// older ones (whole maps) cannot be compared: the other form's sources are
// dropped, named, before anything is written, and the pull completes from
// the rest: the more common form, the newer one on a tie, the anchor's
// whatever the others.
func TestMultiMixedVersions(t *testing.T) {
	older := func(s *Server) { s.hooks = &testHooks{noWindows: true} }
	a, root, _ := fetchServer(t, older)
	b, _, _ := fetchServer(t, nil)
	c, _, _ := fetchServer(t, nil)
	src := filepath.Join(root, "disk.img")
	dst := filepath.Join(t.TempDir(), "copy.img")
	for _, tc := range []struct {
		name    string
		addrs   []string
		anchor  int
		dropped []int
	}{
		{"one older of three", []string{a, b, c}, -1, []int{0}},
		{"a tie", []string{a, b}, -1, []int{0}},
		{"an older anchor", []string{b, a, c}, 1, []int{0, 2}},
	} {
		srcs := sourcesOf(tc.addrs...)
		if tc.anchor >= 0 {
			srcs[tc.anchor].Anchor = true
		}
		require.NoError(t, os.RemoveAll(dst))
		st, err := PullMulti(t.Context(), srcs, dst, patientOpts())
		require.NoError(t, err, tc.name)
		requireSame(t, src, dst)
		for i, s := range st.Sources {
			if slices.Contains(tc.dropped, i) {
				require.Contains(t, s.Dropped, "another version of the fetch", "%s: %s", tc.name, s.Source)
				require.Zero(t, s.Pieces)
			} else {
				require.Empty(t, s.Dropped, "%s: %s", tc.name, s.Source)
			}
		}
	}
}

// TestMultiPieceMapsReadBack: the read-back with piece maps (the maps kept
// aside as pieces are written) finds a stored byte that differs from the
// agreed piece, and data stored in the source's holes; the target stays
// marked incomplete.
func TestMultiPieceMapsReadBack(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "disk.img")
	writeManyExtents(t, src, 3000)
	a, _ := startServer(t, root, nil)
	b, _ := startServer(t, root, nil)
	for _, tc := range []struct {
		name string
		at   int64
		says string
	}{
		{"a byte changed", 2000*8192 + 5, "read back differs at piece 1"},
		// The extent the walk finds: the source's block and the one written after it.
		{"data in a hole", 2500*8192 + 4096, "holds data in the source's holes (at 20480000)"},
	} {
		dst := filepath.Join(t.TempDir(), "copy.img")
		o := patientOpts()
		o.ReadBack = ReadBackOn
		o.hooks = &testHooks{beforeFinalCheck: func(f *os.File) {
			_, err := f.WriteAt([]byte{0xee}, tc.at)
			require.NoError(t, err)
		}}
		_, err := PullMulti(t.Context(), sourcesOf(a, b), dst, o)
		require.ErrorIs(t, err, ErrVerify, tc.name)
		require.ErrorContains(t, err, tc.says)
		require.Equal(t, stateIncomplete, readSidecar(t, dst).State)
	}
}
