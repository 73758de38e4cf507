package localsync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// TestColdExtentsReadDirectly: on ext4, where copy_file_range is only the
// kernel's copy through the page cache, the large extents of a cold source
// are read with O_DIRECT and written, not copied with copy_file_range; a
// cached source, and --method copy-range, keep copy_file_range. Every copy
// is exact to the byte and the hole.
func TestColdExtentsReadDirectly(t *testing.T) {
	const mib = 1 << 20
	l := layout.Layout{Name: "cold", Size: 40 * mib}
	for i := range int64(8) {
		l.Data = append(l.Data, layout.Range{Off: 2 * i * mib, Len: mib})
	}
	// Two small extents far apart: below coldread.MinDirect, through the
	// cache (its readahead merges small reads) by copy_file_range.
	l.Data = append(l.Data, layout.Range{Off: 20 * mib, Len: 4096}, layout.Range{Off: 30 * mib, Len: 4096})
	large := int64(8 * mib)

	dir := loopfs.Mount(t, loopfs.Ext4, 256<<20)
	src := filepath.Join(dir, "src")
	layout.Create(t, src, l)
	copyOnce := func(name string, m Method) (Stats, *target.Faults) {
		t.Helper()
		return copyCounting(t, src, filepath.Join(dir, name), &Options{Method: m})
	}

	loopfs.DropFile(t, src)
	cold, fc := copyOnce("cold", MethodAuto)
	loopfs.DropFile(t, src)
	named, fn := copyOnce("named", MethodCopyRange)
	_, err := os.ReadFile(src) // every page cached
	require.NoError(t, err)
	warm, fw := copyOnce("warm", MethodAuto)

	require.Equal(t, large, cold.DirectReadBytes, "cold: the large extents read directly %+v", cold)
	require.Equal(t, MethodMixed, cold.Method, "%+v", cold)
	require.Equal(t, 2, fc.Calls(target.OpCopyRange), "cold: only the small extents by copy_file_range")
	require.Equal(t, 8, fc.Calls(target.OpWrite), "cold: one write per large extent")

	for _, c := range []struct {
		what string
		st   Stats
		f    *target.Faults
	}{{"warm", warm, fw}, {"--method copy-range", named, fn}} {
		require.Zero(t, c.st.DirectReadBytes, "%s: %+v", c.what, c.st)
		require.Equal(t, MethodCopyRange, c.st.Method, "%s: %+v", c.what, c.st)
		require.Zero(t, c.f.Calls(target.OpWrite), c.what)
	}
	for _, name := range []string{"cold", "named", "warm"} {
		requireExact(t, src, filepath.Join(dir, name), name)
	}
}
