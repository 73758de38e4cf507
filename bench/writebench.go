package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/replica"
)

// WriteBenchOptions configure WriteBench (it moved here from package
// replica). nil and the zero value mean the defaults.
type WriteBenchOptions struct {
	// Size of the volume (default 1 GiB). It is filled with data first so
	// that the measured writes overwrite allocated blocks.
	Size int64
	// QueueDepth is the number of writes in flight (default 1).
	QueueDepth int
	// Duration of the measurement (default 5 s).
	Duration time.Duration
	// Counter is the revision counter mode of the replica.
	Counter replica.CounterMode
	// Flush makes every write durable: each writer calls Flush after each
	// write (concurrent flushes share syncs).
	Flush bool
	// Replica configures the replica (BufferedIO, ...).
	Replica replica.Options
}

// WriteBenchResult is what WriteBench measured.
type WriteBenchResult struct {
	Writes   int64
	Elapsed  time.Duration
	IOPS     float64
	Revision int64 // the replica's counter afterwards (0 when off)
}

// WriteBench creates a replica in dir (which must not hold one), fills it,
// then measures random 4 KiB-aligned 4 KiB writes at the queue depth for
// the duration. It leaves the replica in dir for the caller to remove.
func WriteBench(ctx context.Context, dir string, opts *WriteBenchOptions) (WriteBenchResult, error) {
	if err := opts.Validate(); err != nil {
		return WriteBenchResult{}, err
	}
	var o WriteBenchOptions
	if opts != nil {
		o = *opts
	}
	if o.Size == 0 {
		o.Size = 1 << 30
	}
	if o.QueueDepth <= 0 {
		o.QueueDepth = 1
	}
	if o.Duration <= 0 {
		o.Duration = 5 * time.Second
	}
	ro := o.Replica
	ro.Counter = o.Counter
	r, err := replica.Create(dir, o.Size, &ro)
	if err != nil {
		return WriteBenchResult{}, err
	}
	if err := FillReplica(ctx, r); err != nil {
		r.Close()
		return WriteBenchResult{}, err
	}
	res, err := MeasureWrites(ctx, r, o.QueueDepth, o.Duration, o.Flush)
	res.Revision = r.Revision()
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	return res, err
}

// Validate says which field of o cannot be used (a negative Size,
// QueueDepth or Duration).
func (o *WriteBenchOptions) Validate() error {
	switch {
	case o == nil:
		return nil
	case o.Size < 0:
		return fmt.Errorf("%w: Size %d", ErrInvalidOptions, o.Size)
	case o.QueueDepth < 0:
		return fmt.Errorf("%w: QueueDepth %d", ErrInvalidOptions, o.QueueDepth)
	case o.Duration < 0:
		return fmt.Errorf("%w: Duration %v", ErrInvalidOptions, o.Duration)
	}
	return nil
}

// FillReplica writes every block of r (1 MiB at a time) and flushes: the
// first step of WriteBench, for benchmarks that measure one replica many
// times (replica's counter benchmarks switch its counter mode between
// measurements).
func FillReplica(ctx context.Context, r *replica.Replica) error {
	buf := coldread.AlignedBuffer(1 << 20)
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

// MeasureWrites does WriteBench's measurement on r: random 4 KiB-aligned
// 4 KiB writes by qd writers for d, each followed by a Flush when flush is
// set. The result's Revision is left 0.
func MeasureWrites(ctx context.Context, r *replica.Replica, qd int, d time.Duration, flush bool) (WriteBenchResult, error) {
	var writes atomic.Int64
	var stop atomic.Bool
	var firstErr error
	var once sync.Once
	blocks := r.Size() / replica.BlockSize
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	var wg sync.WaitGroup
	for w := range qd {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w)+1, uint64(start.UnixNano())))
			b := coldread.AlignedBuffer(replica.BlockSize)
			for i := range b {
				b[i] = byte(w + i)
			}
			for n := 0; !stop.Load(); n++ {
				if n%256 == 0 && ctx.Err() != nil {
					once.Do(func() { firstErr = ctx.Err() })
					return
				}
				_, err := r.WriteAt(b, rng.Int64N(blocks)*replica.BlockSize)
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
	res := WriteBenchResult{Writes: writes.Load(), Elapsed: el}
	res.IOPS = float64(res.Writes) / el.Seconds()
	if firstErr != nil {
		return res, fmt.Errorf("write bench: %w", firstErr)
	}
	return res, nil
}
