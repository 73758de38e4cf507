package localsync

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
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

	// The rule never fires: its When sees each call begin and holds it a
	// moment, so that calls made in parallel would overlap there.
	var mu sync.Mutex
	var running, most int
	watch := target.Fault{Op: target.OpCopyRange, When: func() bool {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		return false
	}}
	dst := filepath.Join(dir, "dst")
	faults := target.NewFaults(watch)
	st, err := Copy(context.Background(), src, dst, &Options{Method: MethodCopyRange, faults: faults})
	require.NoError(t, err)
	require.Equal(t, 16*mib, st.CopiedBytes)
	require.GreaterOrEqual(t, faults.Calls(target.OpCopyRange), 16)
	require.Equal(t, 1, most, "copy_file_range calls into one destination overlapped")

	require.Equal(t, layout.SeekWalk(t, src), layout.SeekWalk(t, dst), "hole map")
	a, err := os.ReadFile(src)
	require.NoError(t, err)
	b, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.True(t, bytes.Equal(a, b), "bytes differ")
}
