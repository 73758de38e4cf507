package localsync

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
)

// TestWritebackOffTheWorkers: a copy of many small extents starts the
// destination's writeback as its bytes accumulate, from one goroutine at
// a time (never several workers in sync_file_range on one inode, each
// waiting for the blocks it allocates), all of it before Copy returns, and
// not at all with NoSync; the copy is exact.
func TestWritebackOffTheWorkers(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	l := layout.Layout{Name: "small-extents", Size: 96 * mib}
	for off := int64(0); off+16<<10 <= l.Size; off += 32 << 10 {
		l.Data = append(l.Data, layout.Range{Off: off, Len: 16 << 10})
	}
	layout.Create(t, src, l) // 48 MiB of data in 3,072 extents

	// The rule never fires: its When watches each call, and sleeps, so
	// that calls made from the copy workers themselves would overlap.
	var o overlap
	var mu sync.Mutex
	returned, late := false, 0
	watch := target.Fault{Op: target.OpWriteback, When: func() bool {
		mu.Lock()
		if returned {
			late++
		}
		mu.Unlock()
		o.hold(20 * time.Millisecond)
		return false
	}}

	for _, noSync := range []bool{false, true} {
		dst := filepath.Join(dir, "dst")
		os.Remove(dst)
		o.takeMost()
		mu.Lock()
		returned, late = false, 0
		mu.Unlock()
		faults := target.NewFaults(watch)
		_, err := Copy(context.Background(), src, dst, &Options{NoSync: noSync, Reflink: ReflinkNever, faults: faults})
		mu.Lock()
		returned = true
		mu.Unlock()
		got, gotMost := faults.Calls(target.OpWriteback), o.takeMost()
		require.NoError(t, err)
		requireExact(t, src, dst, fmt.Sprintf("NoSync %v", noSync))
		if noSync {
			require.Zero(t, got, "writeback started with NoSync")
			continue
		}
		require.GreaterOrEqual(t, got, 1, "48 MiB written and no writeback started")
		require.Equal(t, 1, gotMost, "writeback calls overlapped")
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, late, "writeback started after Copy returned")
}
