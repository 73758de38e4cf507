package localsync_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
)

// TestColdFullCopy: a full read/write copy of a cold source reads it with
// O_DIRECT (large extents; the small ones through the cache), a warm
// source through the page cache; both copies are exact.
func TestColdFullCopy(t *testing.T) {
	runAll(t, gib, func(t *testing.T, kind loopfs.Kind, dir string) {
		l := scattered("cold-full", 64*mib, 30, 31)
		l.Size += 1000
		l.Data = append(l.Data, layout.Range{Off: l.Size - 3000, Len: 3000})
		src := filepath.Join(dir, "src")
		layout.Create(t, src, l)
		dropCache(t, src)
		for _, tc := range []struct {
			name string
			opts localsync.Options
		}{{"read-write", localsync.Options{Method: localsync.MethodReadWrite}}, {"detect-zeros", localsync.Options{DetectZeros: true}}} {
			dst := filepath.Join(dir, "cold-"+tc.name)
			st, err := localsync.Copy(t.Context(), src, dst, &tc.opts)
			require.NoError(t, err)
			checkSame(t, src, dst)
			if kind != loopfs.Tmpfs {
				require.Greater(t, st.DirectReadBytes, st.DataBytes/2, "%s: a cold source is read directly: %+v", tc.name, st)
				require.LessOrEqual(t, st.DirectReadBytes, st.DataBytes)
			}
			// checkSame read the source: it is warm now.
			dst = filepath.Join(dir, "warm-"+tc.name)
			st, err = localsync.Copy(t.Context(), src, dst, &tc.opts)
			require.NoError(t, err)
			checkSame(t, src, dst)
			require.Zero(t, st.DirectReadBytes, "%s: a warm source is read through the cache: %+v", tc.name, st)
			dropCache(t, src)
		}
	})
}
