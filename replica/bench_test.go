package replica_test

import (
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/bench/stats"
	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/replica"
)

// BenchmarkWrite measures random 4 KiB overwrites of a filled 256 MiB
// replica (O_DIRECT on the test's filesystem) at queue depth 1 and 8, with
// the counter off, on (mmap page) and per-write (Longhorn's extra O_DIRECT
// counter write per I/O). Compare the IOPS metric across modes:
//
//	go test -run '^$' -bench Write -count 5 ./replica/
func BenchmarkWrite(b *testing.B) {
	for _, qd := range []int{1, 8} {
		for _, mode := range []replica.CounterMode{replica.CounterOff, replica.CounterOn, replica.CounterPerWrite} {
			b.Run("qd="+itoa(qd)+"/counter="+mode.String(), func(b *testing.B) {
				benchRandomWrites(b, mode, 256<<20, qd, false)
			})
		}
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

// BenchmarkWriteFlush measures durable writes: every write is followed by a
// Flush (one fdatasync of the head), so concurrent flushes share syncs
// (group commit). Compare counter off and on: with the counter on the
// header writer also records the flushed count in replica.hdr, behind the
// flushes, at most once per headerInterval.
func BenchmarkWriteFlush(b *testing.B) {
	for _, qd := range []int{1, 8} {
		for _, mode := range []replica.CounterMode{replica.CounterOff, replica.CounterOn} {
			b.Run("qd="+itoa(qd)+"/counter="+mode.String(), func(b *testing.B) {
				benchRandomWrites(b, mode, 64<<20, qd, true)
			})
		}
	}
}

// benchRandomWrites creates and fills a replica of size bytes, then times
// random 4 KiB overwrites (each followed by a Flush when flush is set): one
// goroutine at qd 1, else qd goroutines (GOMAXPROCS=2 here). It reports
// IOPS.
func benchRandomWrites(b *testing.B, mode replica.CounterMode, size int64, qd int, flush bool) {
	r, err := replica.Create(filepath.Join(b.TempDir(), "r"), size, &replica.Options{Counter: mode})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if err := bench.FillReplica(b.Context(), r); err != nil {
		b.Fatal(err)
	}
	blocks := r.Size() / replica.BlockSize
	write := func(buf []byte, rng *rand.Rand) error {
		if _, err := r.WriteAt(buf, rng.Int64N(blocks)*replica.BlockSize); err != nil {
			return err
		}
		if flush {
			return r.Flush()
		}
		return nil
	}
	b.SetBytes(replica.BlockSize)
	b.ReportAllocs()
	start := time.Now()
	var n atomic.Int64
	if qd == 1 {
		buf := coldread.AlignedBuffer(replica.BlockSize)
		rng := rand.New(rand.NewPCG(1, 2))
		for b.Loop() {
			if err := write(buf, rng); err != nil {
				b.Fatal(err)
			}
			n.Add(1)
		}
	} else {
		b.SetParallelism((qd + 1) / 2)
		b.ResetTimer()
		var seed atomic.Uint64
		b.RunParallel(func(pb *testing.PB) {
			buf := coldread.AlignedBuffer(replica.BlockSize)
			rng := rand.New(rand.NewPCG(seed.Add(1), 2))
			for pb.Next() {
				if err := write(buf, rng); err != nil {
					b.Error(err)
					return
				}
				n.Add(1)
			}
		})
	}
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "IOPS")
}

// BenchmarkCounterOverhead measures the counter's cost as a paired ratio
// on one filled replica whose counter mode is switched between alternating
// 200 ms windows (off, on, per-write; 15 rounds, order rotated), so every
// ratio compares the same file, seconds apart, under the same machine
// load. Metrics: median IOPS per mode and the median over the rounds of
// IOPS(mode)/IOPS(off). "off-again" runs the off mode a second time in
// each round: its ratio shows the noise floor of the machine.
//
//	go test -run '^$' -bench CounterOverhead ./replica/
func BenchmarkCounterOverhead(b *testing.B) {
	modes := []replica.CounterMode{replica.CounterOff, replica.CounterOn, replica.CounterPerWrite, replica.CounterOff}
	names := []string{"off", "on", "per-write", "off-again"}
	// Created per-write so that revision.counter is open with O_DIRECT;
	// count() then does exactly what each mode does.
	r, err := replica.Create(filepath.Join(b.TempDir(), "r"), 128<<20, &replica.Options{Counter: replica.CounterPerWrite})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if err := bench.FillReplica(b.Context(), r); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		qd    int
		flush bool
	}{{1, false}, {8, false}, {1, true}, {8, true}} {
		name := "qd=" + itoa(c.qd)
		if c.flush {
			name += "/flush"
		}
		qd := c.qd
		b.Run(name, func(b *testing.B) {
			const rounds = 15
			ratios := make([][]float64, len(modes))
			iops := make([][]float64, len(modes))
			for b.Loop() {
				for round := range rounds {
					for i := range modes {
						m := (i + round) % len(modes)       // no mode always first
						replica.SetCounterMode(r, modes[m]) // no I/O in flight here
						res, err := bench.MeasureWrites(b.Context(), r, qd, 200*time.Millisecond, c.flush)
						if err != nil {
							b.Fatal(err)
						}
						iops[m] = append(iops[m], res.IOPS)
					}
					base := iops[0][len(iops[0])-1]
					for m := range modes {
						ratios[m] = append(ratios[m], iops[m][len(iops[m])-1]/base)
					}
				}
			}
			replica.SetCounterMode(r, replica.CounterPerWrite)
			for m := range modes {
				b.ReportMetric(stats.Median(iops[m]), names[m]+"-IOPS")
				if m > 0 {
					b.ReportMetric(stats.Median(ratios[m]), names[m]+"/off")
				}
			}
		})
	}
}
