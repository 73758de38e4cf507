package tcpsync

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/bench/stats"
	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// BenchmarkColdPush: a full push over loopback of a cold source (1 GiB,
// 25% data in 16 extents of 16 MiB) to an empty target on the same loop
// filesystem, with the source's cold ranges read directly
// (internal/coldread) against the same push reading through the page
// cache, interleaved in every iteration, the source's pages dropped
// (FADV_DONTNEED) before each. x_buffered_paired is the median of the
// per-iteration ratios direct/buffered.
func BenchmarkColdPush(b *testing.B) {
	for _, kind := range []loopfs.Kind{loopfs.Ext4, loopfs.XFS} {
		b.Run(string(kind), func(b *testing.B) {
			dir := loopfs.Mount(b, kind, 4<<30)
			root := filepath.Join(dir, "root")
			if err := os.MkdirAll(root, 0o755); err != nil {
				b.Fatal(err)
			}
			addr, _ := startServer(b, root, nil)
			l := layout.Layout{Name: "cold", Size: 1 << 30}
			for i := range int64(16) {
				l.Data = append(l.Data, layout.Range{Off: i * 64 << 20, Len: 16 << 20})
			}
			src := filepath.Join(dir, "src")
			if err := layout.Write(src, l); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(l.DataBytes())
			var tDirect, tBuffered []time.Duration
			n := 0
			once := func(buffered bool) time.Duration {
				b.StopTimer()
				n++
				name := fmt.Sprintf("img%d", n)
				loopfs.DropFile(b, src)
				coldread.Off.Store(buffered)
				defer coldread.Off.Store(false)
				b.StartTimer()
				t0 := time.Now()
				if _, err := PushFile(b.Context(), addr, src, name, clientOpts()); err != nil {
					b.Fatal(err)
				}
				d := time.Since(t0)
				b.StopTimer()
				os.Remove(filepath.Join(root, name))
				os.Remove(filepath.Join(root, name+sidecarSuffix))
				b.StartTimer()
				return d
			}
			for i := 0; b.Loop(); i++ {
				d, buf := stats.Pair(i, func() time.Duration { return once(false) }, func() time.Duration { return once(true) })
				tDirect, tBuffered = append(tDirect, d), append(tBuffered, buf)
			}
			b.ReportMetric(stats.PairedRatio(tDirect, tBuffered), "x_buffered_paired")
			b.ReportMetric(float64(stats.Median(tDirect).Microseconds())/1000, "direct_ms")
			b.ReportMetric(float64(stats.Median(tBuffered).Microseconds())/1000, "buffered_ms")
		})
	}
}
