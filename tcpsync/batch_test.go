package tcpsync

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
	"github.com/stretchr/testify/require"
)

// writeSmallExtents writes n extents of 4 KiB, one every 8 KiB, to path
// (random bytes, or text that compresses when text is set).
func writeSmallExtents(t *testing.T, path string, n int, seed uint64, text bool) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	r := rand.New(rand.NewPCG(seed, 9))
	b := make([]byte, 4096)
	for i := range n {
		for j := range b {
			if text {
				b[j] = "sparse extents "[(j+i)%15]
			} else {
				b[j] = byte(r.Uint32())
			}
		}
		_, err := f.WriteAt(b, int64(i)*8192)
		require.NoError(t, err)
	}
	require.NoError(t, f.Truncate(int64(n)*8192))
}

// TestBatchWithOlderPeers: a push of small extents is exact whether both
// peers take BATCH frames or either plays an older peer without
// wire.FeatBatch (a DATA frame per extent), raw or compressed, and a
// re-sync after changes is exact too; between current peers the batches
// save each extent its frame's header and tags on the wire.
func TestBatchWithOlderPeers(t *testing.T) {
	const n = 3000
	wire0 := map[string]int64{}
	for _, tc := range []struct {
		name                 string
		oldClient, oldServer bool
		compress             Compression
	}{
		{"both current", false, false, CompressNone},
		{"older client", true, false, CompressNone},
		{"older server", false, true, CompressNone},
		{"both current zstd", false, false, CompressZstd},
		{"older server zstd", false, true, CompressZstd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, local := t.TempDir(), t.TempDir()
			addr, _ := startServer(t, root, func(s *Server) { s.hooks = &testHooks{noBatch: tc.oldServer} })
			src, dst := filepath.Join(local, "src"), filepath.Join(root, "dst.img")
			writeSmallExtents(t, src, n, 1, tc.compress != CompressNone)
			o := clientOpts()
			o.Compress = tc.compress
			o.hooks = &testHooks{noBatch: tc.oldClient}
			st, err := PushFile(t.Context(), addr, src, "dst.img", o)
			require.NoError(t, err)
			require.True(t, st.Verified)
			requireSame(t, src, dst)
			wire0[tc.name] = st.WireBytesSent

			// A re-sync: some extents changed, some new, some gone.
			fs, err := os.OpenFile(src, os.O_RDWR, 0)
			require.NoError(t, err)
			for i := 0; i < n; i += 7 {
				_, err := fs.WriteAt([]byte("changed"), int64(i)*8192+100)
				require.NoError(t, err)
			}
			_, err = fs.WriteAt(make([]byte, 4096), 8192*5) // now zeros
			require.NoError(t, err)
			_, err = sparse.PunchHole(fs, 8192*9, 4096)
			require.NoError(t, err)
			_, err = fs.WriteAt([]byte("new extent"), 8192*11+4096)
			require.NoError(t, err)
			require.NoError(t, fs.Close())
			st, err = PushFile(t.Context(), addr, src, "dst.img", o)
			require.NoError(t, err)
			require.True(t, st.Verified)
			requireSame(t, src, dst)
		})
	}
	// Per extent a DATA frame costs a header, two tags and its head (44
	// bytes); in a batch, 12.
	require.Less(t, wire0["both current"], wire0["older client"]-n*24)
	require.Less(t, wire0["both current"], wire0["older server"]-n*24)
}

// TestHostileBatchesRefused: a client that sends BATCH frames breaking
// their rules (no count, no ranges or too many, a range past the size, not
// block-aligned, of no length, overlapping or descending, behind what was
// already sent, lengths that do not add up to the payload, a frame over
// its limit, or BATCH without having agreed to it) ends its session with
// a protocol error.
func TestHostileBatchesRefused(t *testing.T) {
	addr, _ := startServer(t, t.TempDir(), nil)
	const size, bs = 1 << 20, 4096
	rg := func(off, n int64) wire.Range { return wire.Range{Off: off, Len: n} }
	batch := func(payload int, rs ...wire.Range) []byte {
		return append(wire.AppendBatchHead(nil, rs), make([]byte, payload)...)
	}
	var many []wire.Range
	for i := range wire.MaxBatchRanges + 1 {
		many = append(many, rg(int64(i)*4096, 4096))
	}
	data := binary.LittleEndian.AppendUint64(nil, 8192)
	data = binary.LittleEndian.AppendUint32(data, 4096)
	data = append(data, make([]byte, 4096)...)
	type step struct {
		t    wire.Type
		body []byte
	}
	for _, tc := range []struct {
		name    string
		steps   []step
		noBatch bool
		want    error
	}{
		{"no count", []step{{wire.Batch, []byte{1}}}, false, ErrProtocol},
		{"no ranges", []step{{wire.Batch, []byte{0, 0}}}, false, ErrProtocol},
		{"too many ranges", []step{{wire.Batch, batch(0, many...)}}, false, ErrProtocol},
		{"truncated head", []step{{wire.Batch, batch(0, rg(0, 4096), rg(8192, 4096))[:20]}}, false, ErrProtocol},
		{"range past the size", []step{{wire.Batch, batch(8192, rg(0, 4096), rg(size, 4096))}}, false, ErrProtocol},
		{"range of no length", []step{{wire.Batch, batch(4096, rg(0, 0), rg(8192, 4096))}}, false, ErrProtocol},
		{"range not block-aligned", []step{{wire.Batch, batch(8192, rg(100, 4096), rg(8192, 4096))}}, false, ErrProtocol},
		{"overlapping ranges", []step{{wire.Batch, batch(12288, rg(0, 8192), rg(4096, 4096))}}, false, ErrProtocol},
		{"descending ranges", []step{{wire.Batch, batch(8192, rg(8192, 4096), rg(0, 4096))}}, false, ErrProtocol},
		{"behind an earlier DATA", []step{{wire.Data, data}, {wire.Batch, batch(8192, rg(0, 4096), rg(16384, 4096))}}, false, ErrProtocol},
		{"payload short of the ranges", []step{{wire.Batch, batch(4096, rg(0, 4096), rg(8192, 4096))}}, false, ErrProtocol},
		{"payload over the ranges", []step{{wire.Batch, batch(12288, rg(0, 4096), rg(8192, 4096))}}, false, ErrProtocol},
		{"over the frame limit", []step{{wire.Batch, make([]byte, wire.MaxBatchFrame+1)}}, false, ErrFrameTooLarge},
		{"not agreed", []step{{wire.Batch, batch(8192, rg(0, 4096), rg(8192, 4096))}}, true, ErrProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := rawSessionWith(t, addr, testToken, false, func(f *framer) { f.noBatch = tc.noBatch })
			require.Equal(t, !tc.noBatch, f.batch)
			require.NoError(t, f.send(wire.Open, 0, openBody(opPush, 0, bs, "b")))
			_, _, err := f.expect(wire.Opened)
			require.NoError(t, err)
			require.NoError(t, f.send(wire.SrcInfo, 0, binary.LittleEndian.AppendUint64(srcInfoBody(size, bs, ""), 3*4096)))
			_, _, err = f.expect(wire.DstInfo)
			require.NoError(t, err)
			win, err := wire.WindowFrame(0, size, []sparse.Extent{{Off: 0, Len: 4096}, {Off: 8192, Len: 4096}, {Off: 16384, Len: 4096}})
			require.NoError(t, err)
			require.NoError(t, f.send(wire.Window, 0, win))
			_, _, err = f.expect(wire.Window)
			require.NoError(t, err)
			for _, s := range tc.steps {
				require.NoError(t, sendAnySize(f, s.t, s.body))
			}
			err = readUntilError(f)
			var re *RemoteError
			require.ErrorAs(t, err, &re, "the server says why")
			require.ErrorIs(t, err, tc.want)
		})
	}
}
