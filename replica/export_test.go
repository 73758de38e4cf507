package replica

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/sparse"
)

// chainSpec is a hand-built Longhorn directory: per layer (head first) the
// blocks it holds, each filled with its own byte. Bytes may cover less than
// a block: a layer owns a whole 4 KiB block once any byte of it is allocated.
type layerSpec struct {
	name   string
	writes map[int64][]byte
}

// writeChainDir writes volume.meta, the images and their .meta files the
// way Longhorn lays them out, without using our writer.
func writeChainDir(t testing.TB, dir string, size int64, layers []layerSpec) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	for i, l := range layers {
		parent := ""
		if i+1 < len(layers) {
			parent = layers[i+1].name
		}
		f, err := os.Create(filepath.Join(dir, l.name))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(size))
		for off, b := range l.writes {
			_, err := f.WriteAt(b, off)
			require.NoError(t, err)
		}
		require.NoError(t, f.Close())
		meta := fmt.Sprintf(`{"Name":%q,"Parent":%q,"Removed":false,"UserCreated":%v,"Created":"2024-05-01T09:00:00Z","Labels":null}`, l.name, parent, i > 0)
		require.NoError(t, os.WriteFile(filepath.Join(dir, MetaName(l.name)), []byte(meta), 0o600))
	}
	parent := ""
	if len(layers) > 1 {
		parent = layers[1].name
	}
	vm := fmt.Sprintf(`{"Size":%d,"Head":%q,"Dirty":true,"Rebuilding":false,"Error":"","Parent":%q,"SectorSize":512,"BackingFilePath":""}`, size, layers[0].name, parent)
	require.NoError(t, os.WriteFile(filepath.Join(dir, VolumeMetaFile), []byte(vm), 0o600))
}

func fill(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }

func TestExportLonghornChain(t *testing.T) {
	const size = 1 << 20
	dir := filepath.Join(t.TempDir(), "r")
	layers := []layerSpec{
		{"volume-head-002.img", map[int64][]byte{
			0:          fill('H', BlockSize), // overrides both snapshots
			3*4096 + 7: []byte("hh"),         // 2 bytes: the head owns block 3 (rest zeros)
			40 * 4096:  fill('H', 2*BlockSize),
		}},
		{"volume-snap-b.img", map[int64][]byte{
			0:         fill('b', 4*BlockSize), // blocks 0-3: 1,2 survive
			20 * 4096: fill('b', BlockSize),
			41 * 4096: fill('b', 2*BlockSize), // 41 hidden by the head, 42 survives
		}},
		{"volume-snap-a.img", map[int64][]byte{
			0:           fill('a', 8*BlockSize), // blocks 0-7: 4-7 survive
			20 * 4096:   fill('a', BlockSize),   // hidden by b
			size - 4096: fill('a', BlockSize),   // last block
		}},
	}
	writeChainDir(t, dir, size, layers)

	// The expected image, block by block.
	want := make([]byte, size)
	put := func(off int64, b []byte) { copy(want[off:], b) }
	put(0, fill('a', 8*BlockSize))
	put(0, fill('b', 4*BlockSize))
	put(20*4096, fill('b', BlockSize))
	put(41*4096, fill('b', 2*BlockSize))
	put(size-4096, fill('a', BlockSize))
	put(0, fill('H', BlockSize))
	put(3*4096, make([]byte, BlockSize))
	put(3*4096+7, []byte("hh"))
	put(40*4096, fill('H', 2*BlockSize))
	wantData := []sparse.Extent{{Off: 0, Len: 8 * 4096}, {Off: 20 * 4096, Len: 4096}, {Off: 40 * 4096, Len: 3 * 4096}, {Off: size - 4096, Len: 4096}}

	out := filepath.Join(t.TempDir(), "vol.img")
	st, err := Export(t.Context(), dir, out, nil)
	require.NoError(t, err)
	require.Equal(t, ExportStats{Size: size, DataBytes: 13 * 4096, Layers: 3, Elapsed: st.Elapsed}, st)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "exported bytes differ")
	m, _, err := sparse.ReadMap(t.Context(), out)
	require.NoError(t, err)
	require.Equal(t, wantData, m.RoundOut(BlockSize).Extents(), "holes stay holes")

	// The chain reader reports the same map and reads the same bytes.
	c, err := OpenChain(dir)
	require.NoError(t, err)
	defer c.Close()
	cm, err := c.Extents(t.Context())
	require.NoError(t, err)
	require.Equal(t, wantData, cm.Extents())
	buf := make([]byte, size)
	_, err = c.ReadAt(buf, 0)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, buf))

	// Exporting again replaces the old image; a missing directory fails
	// naming it and leaves the old image.
	_, err = Export(t.Context(), dir, out, nil)
	require.NoError(t, err)
	_, err = Export(t.Context(), filepath.Join(t.TempDir(), "none"), out, nil)
	require.ErrorIs(t, err, ErrNotReplica)
	got, err = os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))
}

// A replica written by our writer (head + two snapshots, unaligned writes)
// exports to what the volume reads.
func TestExportMatchesReplicaReads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	r, err := Create(dir, 4<<20, nil)
	require.NoError(t, err)
	pat := make([]byte, 300_000)
	layout.Pattern(pat, 1)
	_, err = r.WriteAt(pat, 12345)
	require.NoError(t, err)
	require.NoError(t, r.Snapshot("s1", nil))
	_, err = r.WriteAt(pat[:5000], 100_000)
	require.NoError(t, err)
	require.NoError(t, r.Snapshot("s2", nil))
	_, err = r.WriteAt(pat[:70_000], 3<<20)
	require.NoError(t, err)
	want := make([]byte, r.Size())
	_, err = r.ReadAt(want, 0)
	require.NoError(t, err)
	require.NoError(t, r.Close())

	out := filepath.Join(t.TempDir(), "vol.img")
	st, err := Export(t.Context(), dir, out, nil)
	require.NoError(t, err)
	require.Equal(t, 3, st.Layers)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))
	m, _, err := sparse.ReadMap(t.Context(), out)
	require.NoError(t, err)
	require.Equal(t, st.DataBytes, m.RoundOut(BlockSize).Bytes())
}
