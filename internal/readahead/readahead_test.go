package readahead

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInOrderAndDeep: every result reaches use once, in order, whatever
// order the reads finish in; at most depth reads run at once and the
// reads do overlap (the point of the package); depth 1 reads one at a
// time on the caller's goroutine.
func TestInOrderAndDeep(t *testing.T) {
	for _, depth := range []int{0, 1, 2, 4, 16} {
		const n = 200
		var running, most atomic.Int32
		// Read i waits until read i+1 has started (when depth allows),
		// so they finish out of order and overlap.
		started := make([]chan struct{}, n+1)
		for i := range started {
			started[i] = make(chan struct{})
		}
		var got []int
		err := Do(t.Context(), n, depth, func(ctx context.Context, i int) (int, error) {
			now := running.Add(1)
			defer running.Add(-1)
			for {
				m := most.Load()
				if now <= m || most.CompareAndSwap(m, now) {
					break
				}
			}
			close(started[i])
			if depth > 1 && i+1 < n {
				<-started[i+1]
			}
			return i * 10, nil
		}, func(i, v int) error {
			require.Equal(t, i*10, v)
			got = append(got, i)
			return nil
		}, nil)
		require.NoError(t, err)
		require.Len(t, got, n)
		for i, v := range got {
			require.Equal(t, i, v)
		}
		require.LessOrEqual(t, most.Load(), int32(max(depth, 1)), "depth %d", depth)
		if depth > 1 {
			require.Greater(t, most.Load(), int32(1), "depth %d: reads overlap", depth)
		}
	}
}

// TestStopsAtFirstError: an error from a read or from use ends Do with
// that error, once no read runs; nothing is used after it, no read starts
// after it, and every value read but not used is released.
func TestStopsAtFirstError(t *testing.T) {
	boom := errors.New("boom")
	for _, failRead := range []bool{true, false} {
		for _, depth := range []int{1, 4} {
			const n, at = 100, 10
			var mu sync.Mutex
			reads, used, released := map[int]bool{}, map[int]bool{}, map[int]bool{}
			var inFlight atomic.Int32
			err := Do(t.Context(), n, depth, func(ctx context.Context, i int) (int, error) {
				inFlight.Add(1)
				defer inFlight.Add(-1)
				mu.Lock()
				reads[i] = true
				mu.Unlock()
				if failRead && i == at {
					return 0, boom
				}
				return i, nil
			}, func(i, v int) error {
				used[i] = true
				if !failRead && i == at {
					return boom
				}
				return nil
			}, func(v int) {
				mu.Lock()
				released[v] = true
				mu.Unlock()
			})
			require.ErrorIs(t, err, boom)
			require.Zero(t, inFlight.Load(), "a read still runs after Do returned")
			mu.Lock()
			for i := range n {
				switch {
				case i < at:
					require.True(t, used[i], "%d used", i)
				case i == at:
					require.Equal(t, !failRead, used[i])
				default:
					require.False(t, used[i], "%d used after the error", i)
					if reads[i] {
						require.Less(t, i, at+max(depth, 1), "%d read after the error", i)
					}
					require.Equal(t, reads[i], released[i], "%d read and released alike", i)
				}
			}
			mu.Unlock()
		}
	}
}

// TestCancelled: a cancelled context reaches the reads, and its error is
// Do's.
func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	err := Do(ctx, 50, 4, func(ctx context.Context, i int) (int, error) {
		if i == 3 {
			cancel()
		}
		if i >= 3 {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return i, nil
	}, func(int, int) error { return nil }, nil)
	require.ErrorIs(t, err, context.Canceled)
}

// TestCancelledBetweenUses: a context cancelled while use runs ends Do
// before the next use, even when the reads ignore it, and what was read
// ahead is released.
func TestCancelledBetweenUses(t *testing.T) {
	for _, depth := range []int{1, 4} {
		ctx, cancel := context.WithCancel(t.Context())
		var last, released atomic.Int32
		last.Store(-1)
		err := Do(ctx, 50, depth, func(_ context.Context, i int) (int, error) {
			return i, nil
		}, func(i, _ int) error {
			last.Store(int32(i))
			if i == 5 {
				cancel()
			}
			return nil
		}, func(int) { released.Add(1) })
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, int32(5), last.Load(), "depth %d: no use after the cancel", depth)
		require.Equal(t, int32(max(depth, 1)-1), released.Load(), "depth %d: read ahead and released", depth)
	}
}
