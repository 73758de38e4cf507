package rebuild

import (
	"bytes"
	"errors"
	"github.com/sparsesync/sparsesync/replica"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// A rebuild while two writers keep writing (aligned and unaligned writes,
// some inside one block, each writer in its own half): the new replica joins write-only, the volume
// snapshots, the snapshot chain is copied, and the replica becomes RW.
// After the writers stop, all three replicas export to identical images,
// hold the same revision count and pass the start check.
func TestAddReplicaWhileWriting(t *testing.T) {
	t.Run("local", func(t *testing.T) { addReplicaWhileWriting(t, false) })
	t.Run("local+tcp", func(t *testing.T) { addReplicaWhileWriting(t, true) })
}

func addReplicaWhileWriting(t *testing.T, fallback bool) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "r0"), filepath.Join(root, "r1")}
	const size = 32 << 20
	v, err := replica.CreateVolume(dirs, size, &replica.VolumeOptions{Counter: replica.CounterOn})
	require.NoError(t, err)
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += 4 << 20 {
		layout.Pattern(buf, off)
		_, err := v.WriteAt(buf, off)
		require.NoError(t, err)
	}
	require.NoError(t, v.Snapshot("base", nil))

	var stop atomic.Bool
	var writes atomic.Int64
	wrote := make(chan struct{}, 1) // a write completed
	// waitWrites waits (on the writers' signal, not on the clock) until
	// more than n writes have completed.
	waitWrites := func(n int64) {
		t.Helper()
		deadline := time.After(2 * time.Minute)
		for writes.Load() <= n {
			select {
			case <-wrote:
			case <-deadline:
				t.Fatalf("the writers stopped at %d writes", writes.Load())
			}
		}
	}
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			b := make([]byte, 64<<10)
			for !stop.Load() {
				n := 1 + rng.IntN(len(b))
				if rng.IntN(2) == 0 {
					n = (1 + rng.IntN(16)) * replica.BlockSize
				}
				// Each writer owns half of the volume: its writes are
				// ordered, so every replica must end with the same bytes.
				off := int64(w)*size/2 + rng.Int64N(size/2-int64(n))
				if rng.IntN(2) == 0 {
					off -= off % replica.BlockSize
				}
				layout.Pattern(b[:n], off+int64(w)*7+writes.Load())
				if _, err := v.WriteAt(b[:n], off); err != nil {
					t.Error(err)
					return
				}
				writes.Add(1)
				select {
				case wrote <- struct{}{}:
				default:
				}
			}
		})
	}
	waitWrites(8) // the rebuild starts under writes
	target := filepath.Join(root, "r2")
	var o *Options
	if fallback {
		// The local copy of the second file fails; the snapshots come
		// over TCP from a loopback server whose root holds r0.
		n := 0
		o = &Options{Remote: serveDir(t, dirs[0]), TCP: tcpsync.Options{NoAuth: true, MaxAttempts: 1},
			fault: func(step, name string) error {
				if step == "local" {
					if n++; n == 2 {
						return errors.New("injected local copy failure")
					}
				}
				return nil
			}}
	}
	st, err := AddReplica(t.Context(), v, target, o)
	require.NoError(t, err)
	if fallback {
		require.Equal(t, PathLocalTCP, st.Path)
		require.Contains(t, st.FallbackReason, "injected")
	} else {
		require.Equal(t, PathLocal, st.Path)
	}
	// Writes go on after the rebuild, to all three replicas.
	waitWrites(writes.Load() + 8)
	stop.Store(true)
	wg.Wait()
	modes := map[string]string{}
	for _, m := range v.Members() {
		modes[filepath.Base(m.Dir)] = m.Mode
	}
	require.Equal(t, map[string]string{"r0": replica.ModeRW, "r1": replica.ModeRW, "r2": replica.ModeRW}, modes)
	require.NoError(t, v.Close())

	all := append(dirs, target)
	want := exportBytes(t, dirs[0])
	for _, d := range all[1:] {
		require.True(t, bytes.Equal(want, exportBytes(t, d)), "%s differs from r0", d)
	}
	rep, err := replica.Check(all, nil)
	require.NoError(t, err)
	require.Equal(t, all, rep.RW, "%+v", rep)
	i0, err := replica.Inspect(dirs[0], nil)
	require.NoError(t, err)
	i2, err := replica.Inspect(target, nil)
	require.NoError(t, err)
	require.Equal(t, *i0.Revision, *i2.Revision)
	require.Equal(t, i0.Epoch, i2.Epoch)
	t.Logf("%d writes, rebuild %v, %d files", writes.Load(), st.Elapsed, len(st.Files))
}
