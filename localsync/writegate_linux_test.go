package localsync

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
)

// TestOneKernelCopyAtATime: the workers of a copy take turns in
// copy_file_range on large pieces (writegate.go): a filesystem lets only
// one buffered write into an inode at a time, and workers that wait for it
// in the kernel spin. The copy is still exact, holes included.
func TestOneKernelCopyAtATime(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	l := layout.Layout{Name: "large-extents", Size: 32 * mib}
	for off := int64(0); off < l.Size; off += 2 * mib {
		l.Data = append(l.Data, layout.Range{Off: off, Len: mib})
	}
	layout.Create(t, src, l) // 16 extents of 1 MiB: one job each, 8 workers

	var o overlap
	watch := target.Fault{Op: target.OpCopyRange, When: func() bool { o.hold(10 * time.Millisecond); return false }}
	dst := filepath.Join(dir, "dst")
	faults := target.NewFaults(watch)
	st, err := Copy(context.Background(), src, dst, &Options{Method: MethodCopyRange, faults: faults})
	require.NoError(t, err)
	require.Equal(t, 16*mib, st.CopiedBytes)
	require.GreaterOrEqual(t, faults.Calls(target.OpCopyRange), 16)
	require.Equal(t, 1, o.takeMost(), "copy_file_range calls into one destination overlapped")
	requireExact(t, src, dst, "large extents")
}
