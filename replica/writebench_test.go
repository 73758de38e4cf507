package replica

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// The write benchmark's loop, for this package's own benchmarks (which
// switch a replica's counter mode between windows); the public WriteBench
// lives in package bench.

// writeResult is what measureWrites measured.
type writeResult struct {
	Writes  int64
	Elapsed time.Duration
	IOPS    float64
}

// fillReplica writes every block of r (1 MiB at a time) and flushes.
func fillReplica(ctx context.Context, r *Replica) error {
	buf := alignedBuf(1 << 20)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	for off := int64(0); off < r.Size(); off += int64(len(buf)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(int64(len(buf)), r.Size()-off)
		if _, err := r.WriteAt(buf[:n], off); err != nil {
			return err
		}
	}
	return r.Flush()
}

// measureWrites does random 4 KiB writes at queue depth qd for d.
func measureWrites(ctx context.Context, r *Replica, qd int, d time.Duration, flush bool) (writeResult, error) {
	var writes atomic.Int64
	var stop atomic.Bool
	var firstErr error
	var once sync.Once
	blocks := r.Size() / BlockSize
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	var wg sync.WaitGroup
	for w := range qd {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w)+1, uint64(start.UnixNano())))
			b := alignedBuf(BlockSize)
			for i := range b {
				b[i] = byte(w + i)
			}
			for n := 0; !stop.Load(); n++ {
				if n%256 == 0 && ctx.Err() != nil {
					once.Do(func() { firstErr = ctx.Err() })
					return
				}
				_, err := r.WriteAt(b, rng.Int64N(blocks)*BlockSize)
				if err == nil && flush {
					err = r.Flush()
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					stop.Store(true)
					return
				}
				writes.Add(1)
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	res := writeResult{Writes: writes.Load(), Elapsed: el}
	res.IOPS = float64(res.Writes) / el.Seconds()
	if firstErr != nil {
		return res, fmt.Errorf("write bench: %w", firstErr)
	}
	return res, nil
}
