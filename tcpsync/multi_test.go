package tcpsync

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/qos"
)

// multiLayout has ten pieces of data between holes, and an unaligned end.
var multiLayout = layout.Layout{Name: "multi", Size: 64<<20 + 1000,
	Data: layout.Ranges(0, 6<<20, 10<<20, 14<<20, 30<<20, 20<<20+100, 64<<20, 1000)}

// multiData is the layout's data in whole 4 KiB blocks, the last cut at the size.
const multiData int64 = 40<<20 + 4096 + 1000

// fetchServer runs a Server on 127.0.0.1 serving a root that holds
// disk.img; kill stops it at once (its sessions end).
func fetchServer(t *testing.T, mod func(*Server)) (addr, root string, kill func()) {
	t.Helper()
	root = t.TempDir()
	layout.Create(t, filepath.Join(root, "disk.img"), multiLayout)
	srv := &Server{Root: root, Token: testToken, FailDelay: 10 * time.Millisecond}
	if mod != nil {
		mod(srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr, wait, err := ServeLoopback(ctx, srv)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); _ = wait() })
	return addr, root, cancel
}

// slow limits a server's sends, so that no source can finish every piece
// before the others start.
func slow(s *Server) { s.Budget = qos.Budget{Wire: qos.NewLimiter(32 << 20)} }

func multiOpts() *Options {
	o := clientOpts()
	o.IdleTimeout = 2 * time.Second
	return o
}

func sourcesOf(addrs ...string) []MultiSource {
	var s []MultiSource
	for _, a := range addrs {
		s = append(s, MultiSource{Addr: a, Remote: "disk.img"})
	}
	return s
}

func pullMulti(t *testing.T, dst string, addrs ...string) (MultiStats, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	st, err := PullMulti(ctx, sourcesOf(addrs...), dst, multiOpts())
	for _, s := range st.Sources {
		t.Logf("%s: pieces %d copied %d unchanged %d zero %d wire %d failures %d dropped %q",
			s.Source, s.Pieces, s.CopiedBytes, s.UnchangedBytes, s.ZeroBytes, s.WireBytes, s.Failures, s.Dropped)
	}
	return st, err
}

func TestMultiIdenticalSources(t *testing.T) {
	a, root, _ := fetchServer(t, slow)
	b, _, _ := fetchServer(t, slow)
	c, _, _ := fetchServer(t, slow)
	dst := filepath.Join(t.TempDir(), "copy.img")
	st, err := pullMulti(t, dst, a, b, c)
	require.NoError(t, err)
	requireSame(t, filepath.Join(root, "disk.img"), dst)
	require.True(t, st.Verified)
	pieces := 0
	for _, s := range st.Sources {
		require.Positive(t, s.Pieces, "%s served no piece", s.Source)
		require.Empty(t, s.Dropped)
		pieces += s.Pieces
	}
	require.Equal(t, 11, pieces) // 10242 blocks in pieces of 1024
	require.Equal(t, multiData, st.CopiedBytes, "every data block sent once")
	sc := readSidecar(t, dst)
	require.Equal(t, stateComplete, sc.State)
}

func TestMultiDifferentVersionDropped(t *testing.T) {
	a, root, _ := fetchServer(t, nil)
	b, _, _ := fetchServer(t, nil)
	c, croot, _ := fetchServer(t, nil)
	mutate(t, filepath.Join(croot, "disk.img"), 1, 3)
	dst := filepath.Join(t.TempDir(), "copy.img")
	st, err := pullMulti(t, dst, a, b, c)
	require.NoError(t, err)
	requireSame(t, filepath.Join(root, "disk.img"), dst)
	require.Contains(t, st.Sources[2].Dropped, "another version")
	require.ErrorIs(t, st.Sources[2].Err, ErrSourcesDisagree)
	require.Zero(t, st.Sources[2].Pieces)
	require.Less(t, st.Sources[2].WireBytes, int64(64<<10), "no data moved from the odd one out")
	require.Empty(t, st.Sources[0].Dropped)
	require.Empty(t, st.Sources[1].Dropped)

	// The anchor's version is the one fetched, however many disagree.
	srcs := sourcesOf(a, b, c)
	srcs[2].Anchor = true
	st, err = PullMulti(t.Context(), srcs, dst, multiOpts())
	require.NoError(t, err)
	requireSame(t, filepath.Join(croot, "disk.img"), dst)
	require.Contains(t, st.Sources[0].Dropped, "another version")
	require.Contains(t, st.Sources[1].Dropped, "another version")
	require.Positive(t, st.Sources[2].Pieces)
}

func TestMultiAllDisagree(t *testing.T) {
	a, _, _ := fetchServer(t, nil)
	b, broot, _ := fetchServer(t, nil)
	c, croot, _ := fetchServer(t, nil)
	mutate(t, filepath.Join(broot, "disk.img"), 1, 4)
	mutate(t, filepath.Join(croot, "disk.img"), 1, 5)
	dir := t.TempDir()
	dst := filepath.Join(dir, "copy.img")
	_, err := pullMulti(t, dst, a, b, c)
	require.ErrorIs(t, err, ErrSourcesDisagree)
	for _, addr := range []string{a, b, c} {
		require.ErrorContains(t, err, addr)
	}
	ents, rerr := os.ReadDir(dir)
	require.NoError(t, rerr)
	require.Empty(t, ents, "nothing written")

	// Two that disagree: no majority either, and an existing target stays.
	require.NoError(t, os.WriteFile(dst, []byte("old"), 0o644))
	_, err = pullMulti(t, dst, a, b)
	require.ErrorIs(t, err, ErrSourcesDisagree)
	got, rerr := os.ReadFile(dst)
	require.NoError(t, rerr)
	require.Equal(t, "old", string(got))
	_, serr := os.Stat(dst + sidecarSuffix)
	require.ErrorIs(t, serr, os.ErrNotExist)
}

func TestMultiHostileSource(t *testing.T) {
	a, root, _ := fetchServer(t, slow)
	var served atomic.Int32
	b, _, _ := fetchServer(t, func(s *Server) {
		s.fetchHooks = &fetchHooks{piece: func(_ context.Context, k int, b []byte) {
			if k >= 0 && served.Add(1) >= 2 {
				b[len(b)/2] ^= 0x40 // from its second piece on: wrong data, valid frames
			}
		}}
	})
	c, _, _ := fetchServer(t, slow)
	dst := filepath.Join(t.TempDir(), "copy.img")
	st, err := pullMulti(t, dst, a, b, c)
	require.NoError(t, err)
	requireSame(t, filepath.Join(root, "disk.img"), dst)
	require.ErrorIs(t, st.Sources[1].Err, ErrPieceMismatch)
	require.Contains(t, st.Sources[1].Dropped, "wrong data")
	require.LessOrEqual(t, st.Sources[1].Pieces, 1, "only its first piece was right")
	require.Positive(t, st.Sources[1].Failures)
}

func TestMultiKilledAndStalledSources(t *testing.T) {
	a, root, _ := fetchServer(t, slow)
	var kill func()
	var served atomic.Int32
	b, _, killB := fetchServer(t, func(s *Server) {
		s.fetchHooks = &fetchHooks{piece: func(ctx context.Context, k int, _ []byte) {
			if k >= 0 && served.Add(1) == 2 {
				kill() // mid-pull: the server goes away with this piece unanswered
				<-ctx.Done()
			}
		}}
	})
	kill = killB
	c, _, _ := fetchServer(t, func(s *Server) {
		s.fetchHooks = &fetchHooks{piece: func(ctx context.Context, k int, _ []byte) {
			if k >= 0 {
				<-ctx.Done() // says nothing once pieces are asked
			}
		}}
	})
	dst := filepath.Join(t.TempDir(), "copy.img")
	st, err := pullMulti(t, dst, a, b, c)
	require.NoError(t, err)
	requireSame(t, filepath.Join(root, "disk.img"), dst)
	require.Contains(t, st.Sources[1].Dropped, "failed")
	require.Contains(t, st.Sources[2].Dropped, "stalled")
	require.Zero(t, st.Sources[2].Pieces)
	require.Positive(t, st.Sources[0].Pieces)
}

func TestMultiDeltaMovesOnlyChangedBlocks(t *testing.T) {
	var roots []string
	var addrs []string
	for range 3 {
		a, root, _ := fetchServer(t, slow)
		mutate(t, filepath.Join(root, "disk.img"), 40, 9) // the same change on each
		addrs, roots = append(addrs, a), append(roots, root)
	}
	dst := filepath.Join(t.TempDir(), "copy.img")
	layout.Create(t, dst, multiLayout) // the old version
	changed := changedBlocks(t, dst, filepath.Join(roots[0], "disk.img"))
	require.Positive(t, changed)
	st, err := pullMulti(t, dst, addrs...)
	require.NoError(t, err)
	requireSame(t, filepath.Join(roots[0], "disk.img"), dst)
	var copied, unchanged int64
	for _, s := range st.Sources {
		require.Empty(t, s.Dropped)
		copied += s.CopiedBytes
		unchanged += s.UnchangedBytes
	}
	require.Equal(t, changed, copied, "only the changed blocks moved")
	require.Equal(t, st.CopiedBytes, copied)
	require.Equal(t, multiData-changed, unchanged)
	require.Less(t, st.WireBytesReceived, 2*changed+(1<<20))
}

// changedBlocks counts the bytes of the 4 KiB blocks in which a and b differ.
func changedBlocks(t *testing.T, a, b string) int64 {
	t.Helper()
	fa, err := os.Open(a)
	require.NoError(t, err)
	defer fa.Close()
	fb, err := os.Open(b)
	require.NoError(t, err)
	defer fb.Close()
	var n int64
	ba, bb := make([]byte, 4096), make([]byte, 4096)
	for off := int64(0); ; off += 4096 {
		na, ea := fa.ReadAt(ba, off)
		nb, eb := fb.ReadAt(bb, off)
		if !bytes.Equal(ba[:na], bb[:nb]) {
			n += 4096
		}
		if errors.Is(ea, io.EOF) || errors.Is(eb, io.EOF) {
			return n
		}
	}
}

// TestMultiManifestCached: a server computes a version's manifest once; a
// second pull of it reads only the data it serves.
func TestMultiManifestCached(t *testing.T) {
	reads := qos.NewLimiter(0) // unlimited, counted
	a, root, _ := fetchServer(t, func(s *Server) { s.Budget = qos.Budget{Read: reads} })
	dir := t.TempDir()
	_, err := pullMulti(t, filepath.Join(dir, "one.img"), a)
	require.NoError(t, err)
	require.Equal(t, 2*multiData, reads.Bytes(), "the manifest's read, then the pieces'")
	_, err = pullMulti(t, filepath.Join(dir, "two.img"), a)
	require.NoError(t, err)
	require.Equal(t, 3*multiData, reads.Bytes(), "only the pieces' read")
	requireSame(t, filepath.Join(root, "disk.img"), filepath.Join(dir, "two.img"))

	// A new version is a new manifest.
	mutate(t, filepath.Join(root, "disk.img"), 1, 11)
	_, err = pullMulti(t, filepath.Join(dir, "two.img"), a)
	require.NoError(t, err)
	require.Greater(t, reads.Bytes(), 5*multiData-multiData/4, "a new manifest and a compare of every piece")
	requireSame(t, filepath.Join(root, "disk.img"), filepath.Join(dir, "two.img"))
}

// TestMultiAllFailLeavesIncomplete: when every source fails mid-pull the
// target stays marked incomplete, and a rerun from another source
// completes it, fetching only what is missing.
func TestMultiAllFailLeavesIncomplete(t *testing.T) {
	var served atomic.Int32
	a, root, _ := fetchServer(t, func(s *Server) {
		s.fetchHooks = &fetchHooks{piece: func(ctx context.Context, k int, _ []byte) {
			if k >= 0 && served.Add(1) > 3 {
				<-ctx.Done() // stalls after three pieces
			}
		}}
	})
	dst := filepath.Join(t.TempDir(), "copy.img")
	_, err := pullMulti(t, dst, a)
	require.ErrorIs(t, err, ErrNoSource)
	require.Equal(t, stateIncomplete, readSidecar(t, dst).State)

	b, _, _ := fetchServer(t, nil)
	st, err := pullMulti(t, dst, b)
	require.NoError(t, err)
	requireSame(t, filepath.Join(root, "disk.img"), dst)
	require.Equal(t, stateComplete, readSidecar(t, dst).State)
	require.Less(t, st.CopiedBytes, multiData, "the pieces already written were not fetched again")
	require.Positive(t, st.UnchangedBytes)
}

// TestMultiNoData: an empty file and one of holes only come out exact
// (no piece at all), over an older target holding data.
func TestMultiNoData(t *testing.T) {
	for _, l := range []layout.Layout{{Name: "empty"}, {Name: "holes", Size: 8<<20 + 5}} {
		t.Run(l.Name, func(t *testing.T) {
			var addrs []string
			var root string
			for range 2 {
				a, r, _ := fetchServer(t, nil)
				layout.Create(t, filepath.Join(r, "disk.img"), l)
				addrs, root = append(addrs, a), r
			}
			dst := filepath.Join(t.TempDir(), "copy.img")
			layout.Create(t, dst, layout.Layout{Size: 4 << 20, Data: layout.Ranges(0, 1<<20)})
			st, err := pullMulti(t, dst, addrs...)
			require.NoError(t, err)
			requireSame(t, filepath.Join(root, "disk.img"), dst)
			if l.Size > 0 {
				require.Equal(t, int64(1<<20), st.PunchedBytes, "the old data punched")
			}
		})
	}
}
