package tcpsync

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// countingReader records the ranges read through it.
type countingReader struct {
	r     io.ReaderAt
	reads []sparse.Extent
}

func (c *countingReader) ReadAt(b []byte, off int64) (int, error) {
	c.reads = append(c.reads, sparse.Extent{Off: off, Len: int64(len(b))})
	return c.r.ReadAt(b, off)
}

// TestPieceReaderReadsSpans: a piece of small extents is read a span at a
// time (extents less than sparse.ReadGap apart, at most wire.MaxDataPayload),
// not an extent at a time; far-apart extents and large ones alone; the
// bytes come out packed, as the extents hold them; the budget is charged
// the data bytes only.
func TestPieceReaderReadsSpans(t *testing.T) {
	const kib = 1 << 10
	path := filepath.Join(t.TempDir(), "src")
	b := make([]byte, 64<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	require.NoError(t, os.WriteFile(path, b, 0o644))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()

	var ext []sparse.Extent
	for i := range int64(1000) { // 4 KiB every 12 KiB: 12 MiB of span
		ext = append(ext, sparse.Extent{Off: i * 12 * kib, Len: 4 * kib})
	}
	ext = append(ext, sparse.Extent{Off: 20 << 20, Len: 8 * kib}) // far from the rest
	ext = append(ext, sparse.Extent{Off: 30 << 20, Len: 3 << 20}) // large
	var n int64
	for _, e := range ext {
		n += e.Len
	}
	cr := &countingReader{r: f}
	var charged int64
	pr := newPieceReader(n, sourceShort)
	got, err := pr.read(t.Context(), cr, ext, n, func(k int64) error { charged += k; return nil })
	require.NoError(t, err)

	var want []byte
	for _, e := range ext {
		want = append(want, b[e.Off:e.End()]...)
	}
	require.Equal(t, want, got)
	require.Equal(t, n, charged, "the budget is charged data bytes, not holes")
	// 12 MiB of small extents in 1 MiB spans, the far one alone, the large
	// one in 1 MiB reads.
	require.LessOrEqual(t, len(cr.reads), 12+1+1+3)
	for _, r := range cr.reads {
		require.LessOrEqual(t, r.Len, int64(wire.MaxDataPayload))
	}
	require.Contains(t, cr.reads, sparse.Extent{Off: 20 << 20, Len: 8 * kib}, "a far extent is read alone")

	_, err = pr.read(t.Context(), cr, ext, n-1, nil)
	require.Error(t, err, "extents that do not add up to the piece")
}

// failingReaderAt fails every read with err.
type failingReaderAt struct{ err error }

func (f failingReaderAt) ReadAt([]byte, int64) (int, error) { return 0, f.err }

// TestReadExactSaysWhatShrank: a file that ends before a read does is the
// source changing when it is the file sent, and a failed verification
// when it is the target read back (a receiver's or a multi-source
// client's), named; any other failure is wrapped with the file and offset.
func TestReadExactSaysWhatShrank(t *testing.T) {
	r := bytes.NewReader(make([]byte, 10))
	err := readExact(r, make([]byte, 16), 0, sourceShort)
	require.ErrorIs(t, err, ErrSourceChanged)
	require.Contains(t, err.Error(), "the source shrank")

	target := shortRead{"dst.img", ErrVerify}
	err = readExact(r, make([]byte, 16), 0, target)
	require.ErrorIs(t, err, ErrVerify)
	require.NotErrorIs(t, err, ErrSourceChanged)
	require.Contains(t, err.Error(), "dst.img shrank")

	err = readExact(failingReaderAt{syscall.EIO}, make([]byte, 16), 4096, target)
	require.ErrorIs(t, err, syscall.EIO)
	require.NotErrorIs(t, err, ErrVerify)
	require.Contains(t, err.Error(), "reading dst.img at 4096")

	require.NoError(t, readExact(r, make([]byte, 10), 0, target), "a read that ends at the end of the file")

	_, err = newPieceReader(16, target).read(t.Context(), r, []sparse.Extent{{Off: 0, Len: 16}}, 16, nil)
	require.ErrorIs(t, err, ErrVerify, "a piece reader reads as its file says")
}
