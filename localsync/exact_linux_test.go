package localsync

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
)

// requireExact fails t unless dst has src's hole map and bytes.
func requireExact(t *testing.T, src, dst, what string) {
	t.Helper()
	require.Equal(t, layout.SeekWalk(t, src), layout.SeekWalk(t, dst), "hole map (%s)", what)
	a, err := os.ReadFile(src)
	require.NoError(t, err)
	b, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.True(t, bytes.Equal(a, b), "bytes differ (%s)", what)
}

// overlap counts the calls that run at once in a fault rule's When (which
// never fires): each call is held there a moment, so that calls made in
// parallel would be seen overlapping.
type overlap struct {
	mu            sync.Mutex
	running, most int
}

func (o *overlap) hold(d time.Duration) {
	o.mu.Lock()
	o.running++
	o.most = max(o.most, o.running)
	o.mu.Unlock()
	time.Sleep(d)
	o.mu.Lock()
	o.running--
	o.mu.Unlock()
}

// takeMost returns the most calls seen at once, and starts counting anew.
func (o *overlap) takeMost() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := o.most
	o.most = 0
	return m
}

// copyCounting copies src to dst with opts and Faults that count and
// record the destination's kernel calls and fail none.
func copyCounting(t *testing.T, src, dst string, opts *Options) (Stats, *target.Faults) {
	t.Helper()
	f := target.NewFaults()
	SetFaults(opts, f)
	st, err := Copy(context.Background(), src, dst, opts)
	require.NoError(t, err)
	return st, f
}
