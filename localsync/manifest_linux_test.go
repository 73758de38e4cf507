package localsync_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/manifest"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/localsync"
)

// TestManifestSparesDestinationReads: with a manifest, the second re-sync
// of a changed source reads the source and, of the destination, only the
// 64 KiB blocks that changed (the kernel's count of this process's reads,
// /proc/self/io, is the oracle), writes only the changed blocks, and leaves
// an exact copy. A destination changed behind the mark, a sidecar open to
// others and another destination's sidecar are not trusted: the re-sync
// reads both files and repairs what was changed. Not parallel: the read
// count is the whole process's.
func TestManifestSparesDestinationReads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	l := quickLayout() // 64 extents of 128 KiB, one per MiB
	data := l.DataBytes()
	layout.Create(t, src, l)
	opts := &localsync.Options{Manifest: true}

	_, err := localsync.Copy(ctx, src, dst, opts)
	require.NoError(t, err)
	_, err = os.Stat(manifest.Path(dst))
	require.ErrorIs(t, err, os.ErrNotExist, "a first copy compares nothing and keeps no manifest")

	change := func(offs ...int64) {
		for _, off := range offs {
			writeAt(t, src, off, []byte("changed!"))
		}
	}
	resync := func() (localsync.Stats, int64) {
		t.Helper()
		before := readBytes(t)
		st, err := localsync.Copy(ctx, src, dst, opts)
		read := readBytes(t) - before
		require.NoError(t, err)
		checkSame(t, src, dst)
		checkStatsAdd(t, st)
		return st, read
	}

	change(3*mib+100, 9*mib+70*kib)
	st, read := resync()
	require.Zero(t, st.ManifestBytes, "no manifest yet: %+v", st)
	require.GreaterOrEqual(t, read, 2*data, "the first re-sync reads both files")
	fi, err := os.Stat(manifest.Path(dst))
	require.NoError(t, err, "the first re-sync that compares keeps a manifest")
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	change(5*mib+4*kib, 20*mib+64*kib+8)
	st, read = resync()
	require.Equal(t, data-2*64*kib, st.ManifestBytes, "all but the two changed 64 KiB blocks vouched for: %+v", st)
	require.Equal(t, 2*4*kib, st.CopiedBytes, "only the changed blocks written")
	require.GreaterOrEqual(t, read, data, "the source is read whole")
	require.Less(t, read, data+2*64*kib+64*kib, "of the destination, only the two changed blocks are read (read %d)", read)

	// Changed behind the mark (its mtime moves): nothing is vouched for,
	// and the change is repaired.
	writeAt(t, dst, 7*mib, []byte("behind the sync's back"))
	change(30 * mib)
	st, read = resync()
	require.Zero(t, st.ManifestBytes, "a destination changed since its mark: %+v", st)
	require.GreaterOrEqual(t, read, 2*data)

	// A sidecar others can read (and so craft collisions with its key).
	change(31 * mib)
	_, _ = resync() // a manifest again
	require.NoError(t, os.Chmod(manifest.Path(dst), 0o644))
	change(32 * mib)
	st, _ = resync()
	require.Zero(t, st.ManifestBytes, "a sidecar of mode 0644: %+v", st)

	// Another destination's sidecar in its place: not the one the mark names.
	other := filepath.Join(dir, "other")
	_, _ = localsync.Copy(ctx, src, other, opts)
	change(33 * mib)
	_, err = localsync.Copy(ctx, src, other, opts)
	require.NoError(t, err)
	require.FileExists(t, manifest.Path(other))
	change(34 * mib)
	_, _ = resync()
	require.NoError(t, os.Rename(manifest.Path(other), manifest.Path(dst)))
	change(35 * mib)
	st, _ = resync()
	require.Zero(t, st.ManifestBytes, "another destination's sidecar: %+v", st)

	// Without the option no sidecar is written, and an old one goes.
	change(36 * mib)
	_, _ = resync()
	require.FileExists(t, manifest.Path(dst))
	change(37 * mib)
	st, err = localsync.Copy(ctx, src, dst, &localsync.Options{})
	require.NoError(t, err)
	require.Zero(t, st.ManifestBytes)
	checkSame(t, src, dst)
	require.NoFileExists(t, manifest.Path(dst), "the old sidecar goes")
}

// TestManifestExactAcrossChanges: re-syncs with manifests stay exact, to
// the byte and the hole, through rounds of random changes of the source:
// writes at any offset and length, holes punched, data appended, the size
// grown and cut to sizes that are not whole digest blocks, and comparison
// blocks smaller and larger than a digest block. Each round also writes
// exactly what a re-sync without a manifest writes into a second copy: a
// block vouched for is never written, and a changed one always is.
func TestManifestExactAcrossChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, bs := range []int64{4 * kib, 16 * kib, 128 * kib} {
		for seed := range uint64(3) {
			t.Run("", func(t *testing.T) {
				t.Parallel()
				r := rand.New(rand.NewPCG(seed, uint64(bs)))
				dir := t.TempDir()
				src, dst, plain := filepath.Join(dir, "src"), filepath.Join(dir, "dst"), filepath.Join(dir, "plain")
				l := scattered("m", 24*mib+r.Int64N(mib), 30, seed)
				layout.Create(t, src, l)
				opts := &localsync.Options{Manifest: true, BlockSize: bs, DetectZeros: seed == 2}
				var vouched int64
				for round := range 8 {
					st, err := localsync.Copy(ctx, src, dst, opts)
					require.NoError(t, err, "round %d", round)
					noManifest := *opts
					noManifest.Manifest = false
					want, err := localsync.Copy(ctx, src, plain, &noManifest)
					require.NoError(t, err, "round %d", round)
					require.Equal(t, want.CopiedBytes, st.CopiedBytes, "round %d: written, as without a manifest", round)
					require.Equal(t, want.PunchedBytes+want.ZeroBytes, st.PunchedBytes+st.ZeroBytes, "round %d: holes", round)
					if opts.DetectZeros {
						checkIdentical(t, src, dst) // zero blocks became holes
					} else {
						checkSameBytes(t, src, dst)
					}
					vouched += st.ManifestBytes
					f, err := os.OpenFile(src, os.O_RDWR, 0)
					require.NoError(t, err)
					fi, err := f.Stat()
					require.NoError(t, err)
					size := fi.Size()
					for range 1 + r.IntN(6) {
						off, n := r.Int64N(size), 1+r.Int64N(256*kib)
						switch r.IntN(5) {
						case 0:
							require.NoError(t, unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n))
						case 1:
							_, err = f.WriteAt(make([]byte, n), off) // zeros written as data
							require.NoError(t, err)
						default:
							b := make([]byte, n)
							for i := range b {
								b[i] = byte(r.Uint32())
							}
							_, err = f.WriteAt(b, off)
							require.NoError(t, err)
						}
					}
					if r.IntN(3) == 0 {
						require.NoError(t, f.Truncate(size+r.Int64N(3*mib)-mib))
					}
					require.NoError(t, f.Close())
				}
				if bs < 128*kib {
					require.Positive(t, vouched, "some re-sync used a manifest")
				}
			})
		}
	}
}

// TestManifestCoversExtentEdges: data extents that start and end inside
// digest blocks (a VM image's) are vouched for to the byte: the second
// re-sync reads, of the destination, only the piece of an extent that
// holds the change, cut at the 64 KiB grid.
func TestManifestCoversExtentEdges(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	l := layout.Layout{Name: "edges", Size: 32 * mib}
	for i := range int64(32) {
		l.Data = append(l.Data, layout.Range{Off: i*mib + 12*kib, Len: 100 * kib}) // [12, 64) and [64, 112) KiB of each MiB
	}
	layout.Create(t, src, l)
	opts := &localsync.Options{Manifest: true}
	for round := range 3 {
		writeAt(t, src, 7*mib+20*kib, []byte{byte(round), 1, 2, 3})
		st, err := localsync.Copy(ctx, src, dst, opts)
		require.NoError(t, err)
		checkSame(t, src, dst)
		switch round {
		case 0, 1:
			require.Zero(t, st.ManifestBytes, "round %d: no manifest yet", round)
		case 2:
			require.Equal(t, l.DataBytes()-52*kib, st.ManifestBytes, "all but [12, 64) KiB of the changed extent: %+v", st)
			require.Equal(t, 4*kib, st.CopiedBytes)
		}
	}
}
