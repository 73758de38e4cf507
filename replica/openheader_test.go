package replica

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/target"
)

// copyFlat copies the regular files of dir from into a new directory to
// (new inodes: a header copied along names a head that is not there).
func copyFlat(t *testing.T, from, to string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(to, 0o700))
	ents, err := os.ReadDir(from)
	require.NoError(t, err)
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(to, e.Name()), b, 0o600))
	}
}

// Open of a directory whose replica.hdr is not its replica's own (a copied
// directory, or Longhorn's Delete and re-create) replaces that header
// whole. The directory as it is when Open writes its first header (what a
// kill there leaves; it may be the source of a rebuild) still has every
// file, a header of full size, the same content and count, and opens. An
// Open that removed the leftover first, or created the new file in place,
// left a replica without its header or with an empty or zeroed one, which
// no Open accepts.
func TestOpenReplacesLeftoverHeaderWhole(t *testing.T) {
	for _, mode := range []CounterMode{CounterOn, CounterOff} {
		t.Run(mode.String(), func(t *testing.T) {
			root := t.TempDir()
			orig, dir, at := filepath.Join(root, "orig"), filepath.Join(root, "copy"), filepath.Join(root, "at")
			r, err := Create(orig, 1<<20, &Options{Counter: mode})
			require.NoError(t, err)
			b := alignedBuf(BlockSize)
			for i := range 5 {
				b[0] = byte(i + 1)
				_, err = r.WriteAt(b, int64(i)*3*BlockSize)
				require.NoError(t, err)
			}
			require.NoError(t, r.Close())
			copyFlat(t, orig, dir)
			before, err := Inspect(dir, nil)
			require.NoError(t, err)
			require.NotEmpty(t, before.IgnoredHeader, "the copy's header names the original's head")
			names, sha := fileNames(t, dir), exportSHA(t, dir)

			calls := 0
			r, err = Open(dir, &Options{faults: target.NewFaults(target.Fault{Op: target.OpSidecarWrite, Path: HeaderFile, When: func() bool {
				if calls == 0 {
					copyFlat(t, dir, at)
				}
				calls++
				return false
			}})})
			require.NoError(t, err)
			require.NoError(t, r.Close())
			require.Positive(t, calls, "Open wrote no header")

			require.Subset(t, fileNames(t, at), names, "a kill in Open takes files of the replica")
			fi, err := os.Stat(filepath.Join(at, HeaderFile))
			require.NoError(t, err)
			require.EqualValues(t, headerFileSize, fi.Size())
			require.Equal(t, sha, exportSHA(t, at))
			after, err := Inspect(at, nil)
			require.NoError(t, err)
			require.Equal(t, before.Revision, after.Revision)
			require.Equal(t, before.CounterMode, after.CounterMode)
			r, err = Open(at, nil)
			require.NoError(t, err)
			require.NoError(t, r.Close())
		})
	}
}
