package localsync_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
	"github.com/sparsesync/sparsesync/qos"
)

// BenchmarkBwlimit copies and re-syncs under --bwlimit rates of 10, 50 and
// 200 MiB/s and reports the rate achieved in each one-second window, as a
// fraction of the limit: the median window (want within 5% of 1) and the
// busiest (want at most 1.2). The bytes counted are the copy's own progress
// (data copied; for a re-sync, twice the data compared, since it reads both
// files), sampled as it goes, so what is judged is what moved, not what the
// limiter admitted. Each run lasts about 6 s.
//
//	go test -run '^$' -bench Bwlimit -benchtime 1x ./localsync
func BenchmarkBwlimit(b *testing.B) {
	for _, place := range benchPlaces(b, loopfs.Ext4) {
		inPlace(b, place, func(b *testing.B, dir string) {
			for _, mibps := range []int64{10, 50, 200} {
				rate := mibps << 20
				data := 6 * rate
				src := filepath.Join(dir, fmt.Sprintf("src-%d", mibps))
				writeScattered(b, src, 4*data, data)
				for _, kind := range []string{"copy", "resync"} {
					b.Run(fmt.Sprintf("limit=%dMiB/%s", mibps, kind), func(b *testing.B) {
						var med, worst []float64
						for range b.N {
							dst := filepath.Join(dir, "dst")
							if kind == "copy" {
								os.Remove(dst)
							} else if _, err := os.Stat(dst); err != nil {
								if _, err := localsync.Copy(b.Context(), src, dst, nil); err != nil {
									b.Fatal(err)
								}
							}
							dropCaches(b)
							m, w := windows(b, src, dst, rate, kind == "resync")
							med, worst = append(med, m), append(worst, w)
						}
						slices.Sort(med)
						b.ReportMetric(med[len(med)/2], "median-window/limit")
						b.ReportMetric(slices.Max(worst), "max-window/limit")
						b.ReportMetric(loadAvg(), "load")
					})
				}
			}
		})
	}
}

// windows runs one limited copy and returns the median and largest
// per-second byte counts, divided by the limit. The last, partial second
// is left out.
func windows(b *testing.B, src, dst string, rate int64, resync bool) (median, worst float64) {
	b.Helper()
	type sample struct {
		at   time.Duration
		done int64
	}
	var mu sync.Mutex
	samples := []sample{{0, 0}}
	start := time.Now()
	perByte := int64(1)
	if resync {
		perByte = 2 // a comparison reads the source and the destination
	}
	opts := localsync.Options{
		Budget:  qos.NewBudget(rate),
		Reflink: localsync.ReflinkNever, // a clone moves no bytes to limit
		Progress: func(done, _ int64) {
			mu.Lock()
			samples = append(samples, sample{time.Since(start), done * perByte})
			mu.Unlock()
		},
	}
	if _, err := localsync.Copy(b.Context(), src, dst, &opts); err != nil {
		b.Fatal(err)
	}
	slices.SortFunc(samples, func(x, y sample) int { return int(x.at - y.at) })
	var secs []float64
	for s := time.Second; s <= samples[len(samples)-1].at; s += time.Second {
		// Bytes done by the end of this second minus by its start.
		lo, hi := int64(0), int64(0)
		for _, x := range samples {
			if x.at < s-time.Second {
				lo = max(lo, x.done)
			}
			if x.at < s {
				hi = max(hi, x.done)
			}
		}
		secs = append(secs, float64(hi-lo)/float64(rate))
	}
	if len(secs) == 0 {
		b.Fatalf("the copy took under a second at %d B/s: nothing to judge", rate)
	}
	b.Logf("windows: %.2f", secs)
	worst = slices.Max(secs)
	slices.Sort(secs)
	return secs[len(secs)/2], worst
}

// writeScattered makes a file of size with data bytes of random content in
// 1 MiB extents spread evenly over it.
func writeScattered(b *testing.B, path string, size, data int64) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		b.Fatal(err)
	}
	const ext = 1 << 20
	n := data / ext
	buf := make([]byte, ext)
	rng := rand.New(rand.NewPCG(uint64(size), 7))
	for k := range n {
		for i := range buf {
			buf[i] = byte(rng.Uint32() | 1)
		}
		if _, err := f.WriteAt(buf, k*(size/n)); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}
