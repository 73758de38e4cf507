package localsync_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
)

// reflinkFile makes to a clone of from (FICLONE), durable.
func reflinkFile(t *testing.T, from, to string) {
	t.Helper()
	cloneFile(t, from, to)
	syncFile(t, to)
}

// TestSharedWithThirdFiles re-syncs a destination when the source and the
// destination each share all their blocks with *other* files (snapshots,
// backups): FIEMAP marks both sides shared at the same offsets, yet they
// hold different bytes, so nothing may be skipped unread.
func TestSharedWithThirdFiles(t *testing.T) {
	for _, kind := range []loopfs.Kind{loopfs.XFS, loopfs.Btrfs} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			dir := loopfs.Mount(t, kind, gib)
			p := func(s string) string { return filepath.Join(dir, s) }
			r := rand.New(rand.NewPCG(4, 4))
			a := make([]byte, 8*mib)
			for i := range a {
				a[i] = byte(r.Uint32())
			}
			b := bytes.Clone(a)
			// 5 blocks differ; the rest is equal bytes in other blocks.
			for _, off := range []int64{0, 4096 * 100, 3 * mib, 5*mib + 8192, 8*mib - 4096} {
				for i := range 4096 {
					b[off+int64(i)] ^= 0x5a
				}
			}
			require.NoError(t, os.WriteFile(p("snap-src"), a, 0o644))
			require.NoError(t, os.WriteFile(p("snap-dst"), b, 0o644))
			reflinkFile(t, p("snap-src"), p("src"))
			reflinkFile(t, p("snap-dst"), p("dst"))

			// Compared (reflink never): only the 5 differing blocks written.
			reflinkFile(t, p("snap-dst"), p("dst-auto"))
			st, err := localsync.Copy(t.Context(), p("src"), p("dst"), &localsync.Options{Reflink: localsync.ReflinkNever})
			require.NoError(t, err)
			require.Equal(t, a, fileBytes(t, p("dst")), "destination not exact")
			require.Equal(t, 5*4096, int(st.CopiedBytes+st.ClonedBytes), "%+v", st)
			checkStatsAdd(t, st)

			// Re-synced by cloning (reflink auto): the destination's blocks,
			// shared with its own snapshot, become the source's, unread.
			st, err = localsync.Copy(t.Context(), p("src"), p("dst-auto"), nil)
			require.NoError(t, err)
			require.Equal(t, a, fileBytes(t, p("dst-auto")), "destination not exact")
			require.Equal(t, int64(len(a)), st.ClonedBytes, "%+v", st)
			require.Zero(t, st.CopiedBytes+st.DirectReadBytes, "%+v", st)
			checkStatsAdd(t, st)

			// A clone of the source is equal unread, all of it.
			reflinkFile(t, p("src"), p("dst2"))
			st, err = localsync.Copy(t.Context(), p("src"), p("dst2"), nil)
			require.NoError(t, err)
			require.Equal(t, int64(len(a)), st.UnchangedBytes, "%+v", st)
			require.Zero(t, st.DirectReadBytes+st.CopiedBytes+st.ClonedBytes, "%+v", st)
		})
	}
}
