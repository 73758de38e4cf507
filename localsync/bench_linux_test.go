package localsync_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/bench/stats"
	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
)

// benchDir is where benchmarks run. Empty: on fresh ext4, XFS (reflink) and
// btrfs loop filesystems (root) or a temporary directory. Point it at a real
// mount to measure a disk:
//
//	go test -run '^$' -bench . -benchtime 5x ./localsync -args -dir /mnt/nvme
var benchDir = flag.String("dir", "", "directory to run the benchmarks in (default: loop filesystems, else a temporary directory)")

// benchPlaces returns (name, directory) pairs to run a benchmark in.
func benchPlaces(b *testing.B, kinds ...loopfs.Kind) [][2]string {
	if *benchDir != "" {
		return [][2]string{{"dir", *benchDir}}
	}
	if os.Geteuid() != 0 {
		return [][2]string{{"tmp", b.TempDir()}}
	}
	var out [][2]string
	for _, k := range kinds {
		out = append(out, [2]string{string(k), string(k)})
	}
	return out
}

// inPlace runs fn in a sub-benchmark with a directory for place.
func inPlace(b *testing.B, place [2]string, fn func(b *testing.B, dir string)) {
	b.Run(place[0], func(b *testing.B) {
		dir := place[1]
		if *benchDir == "" && os.Geteuid() == 0 {
			dir = loopfs.Mount(b, loopfs.Kind(place[1]), 12*gib)
		} else {
			var err error
			if dir, err = os.MkdirTemp(dir, "localsync-bench-"); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { os.RemoveAll(dir) })
		}
		fn(b, dir)
	})
}

func dropCaches(b *testing.B) { loopfs.DropCaches(b) }

// run times a command, failing the benchmark on error.
func run(b *testing.B, name string, args ...string) time.Duration {
	b.Helper()
	t0 := time.Now()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		b.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	return time.Since(t0)
}

// loadAvg returns the 1-minute load average (0 if unknown), reported with
// each figure: the machine these benchmarks run on is often shared.
func loadAvg() float64 {
	var l float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &l)
	}
	return l
}

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

// cli builds cmd/sparsesync once for the peak-RSS measurements.
func cli(b *testing.B) string {
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "localsync-bench-cli-")
		if err != nil {
			cliErr = err
			return
		}
		cliPath = filepath.Join(dir, "sparsesync")
		if out, err := exec.Command("go", "build", "-o", cliPath, "../cmd/sparsesync").CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if cliErr != nil {
		b.Skipf("cannot build the CLI for the RSS measurement: %v", cliErr)
	}
	return cliPath
}

// runCLI runs "sparsesync local args..." as a child process and returns
// its wall time and peak resident set size (getrusage ru_maxrss) in MiB:
// the whole process, not just the Go heap.
func runCLI(b *testing.B, args ...string) (time.Duration, float64) {
	b.Helper()
	cmd := exec.Command(cli(b), append([]string{"local"}, args...)...)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		b.Fatalf("sparsesync local %v: %v: %s", args, err, out)
	}
	return d, float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024
}

// copyVsCp copies src to a fresh file with localsync (in this process),
// with the sparsesync CLI (a child process, like cp) and with cp, cold cache
// for each, the three interleaved in every iteration. All are made durable:
// localsync fdatasyncs, cp is followed by sync -d on its output. It reports
// MB/s of data, the ratios of median wall times (x_cp for the library,
// x_cp_cli for the CLI; below 1 means faster than cp), the CLI's peak RSS
// and the load average.
func copyVsCp(b *testing.B, dir, src string, l layout.Layout, opts localsync.Options, cpArgs ...string) {
	ours, theirs := filepath.Join(dir, "ours"), filepath.Join(dir, "cp")
	var tOurs, tCLI, tCp []time.Duration
	var rss float64
	b.SetBytes(l.DataBytes())
	b.ReportAllocs()
	load := loadAvg()
	for b.Loop() {
		b.StopTimer()
		os.Remove(ours)
		os.Remove(theirs)
		dropCaches(b)
		b.StartTimer()
		t0 := time.Now()
		if _, err := localsync.Copy(b.Context(), src, ours, &opts); err != nil {
			b.Fatal(err)
		}
		tOurs = append(tOurs, time.Since(t0))
		b.StopTimer()
		os.Remove(ours)
		dropCaches(b)
		d, r := runCLI(b, "--method", opts.Method.String(), src, ours)
		tCLI, rss = append(tCLI, d), max(rss, r)
		dropCaches(b)
		tCp = append(tCp, run(b, "cp", append(cpArgs, src, theirs)...)+run(b, "sync", "-d", theirs))
		b.StartTimer()
	}
	b.ReportMetric(float64(stats.Median(tOurs))/float64(stats.Median(tCp)), "x_cp")
	b.ReportMetric(float64(stats.Median(tCLI))/float64(stats.Median(tCp)), "x_cp_cli")
	b.ReportMetric(stats.PairedRatio(tOurs, tCp), "x_cp_paired")
	b.ReportMetric(float64(stats.Median(tCp).Microseconds())/1000, "cp_ms")
	b.ReportMetric(float64(stats.Median(tOurs).Microseconds())/1000, "ours_ms")
	b.ReportMetric(float64(stats.Median(tCLI).Microseconds())/1000, "cli_ms")
	b.ReportMetric(rss, "peak_rss_MiB")
	b.ReportMetric((load+loadAvg())/2, "load1")
	os.Remove(ours)
	os.Remove(theirs)
}

// BenchmarkCopy10pct: a file with 10% data in about 200 extents (64 KiB to
// 4 MiB), copied into a new file, against cp --sparse=auto on ext4 and
// cp --reflink=always on XFS and btrfs. On XFS and btrfs a reflink costs
// per extent, not per byte, so the 2 and 8 GiB files there are the 1 GiB
// layout scaled up (same extent count, extents 2 and 8 times longer): the
// time must not grow with the size.
func BenchmarkCopy10pct(b *testing.B) {
	for _, place := range benchPlaces(b, loopfs.Ext4, loopfs.XFS, loopfs.Btrfs) {
		inPlace(b, place, func(b *testing.B, dir string) {
			reflink := place[0] == "xfs" || place[0] == "btrfs"
			var layouts []layout.Layout
			if reflink {
				base := scattered("10pct", gib, 10, 42)
				layouts = []layout.Layout{base, scaled(base, 2), scaled(base, 8)}
			} else {
				layouts = []layout.Layout{scattered("10pct", gib, 10, 42), scattered("10pct", 2*gib, 10, 42)}
			}
			for _, l := range layouts {
				name := fmt.Sprintf("%dGiB-%dextents", l.Size>>30, len(l.Data))
				if !benchWanted(b, name) {
					continue
				}
				src := filepath.Join(dir, "src")
				if err := layout.Write(src, l); err != nil {
					b.Fatal(err)
				}
				cpArgs := []string{"--sparse=auto"}
				if reflink {
					cpArgs = []string{"--reflink=always"}
				}
				b.Run(name, func(b *testing.B) {
					copyVsCp(b, dir, src, l, localsync.Options{}, cpArgs...)
				})
				os.Remove(src)
			}
		})
	}
}

// scaled multiplies the offsets, lengths and size of l by k.
func scaled(l layout.Layout, k int64) layout.Layout {
	out := layout.Layout{Name: l.Name, Size: l.Size * k}
	for _, d := range l.Data {
		out.Data = append(out.Data, layout.Range{Off: d.Off * k, Len: d.Len * k})
	}
	return out
}

// benchWanted reports whether -test.bench can select the sub-benchmark
// name of b (so that big source files are not written for nothing).
func benchWanted(b *testing.B, name string) bool {
	pat := flag.Lookup("test.bench").Value.String()
	parts := strings.Split(pat, "/")
	depth := strings.Count(b.Name(), "/") + 1
	if depth >= len(parts) {
		return true
	}
	ok, err := regexp.MatchString(parts[depth], name)
	return err != nil || ok
}

// BenchmarkCopy100kExtents: 100,000 extents of 4 KiB against cp on ext4.
func BenchmarkCopy100kExtents(b *testing.B) {
	for _, place := range benchPlaces(b, loopfs.Ext4) {
		inPlace(b, place, func(b *testing.B, dir string) {
			l := layout.Standard()[5]
			src := filepath.Join(dir, "src")
			if err := layout.Write(src, l); err != nil {
				b.Fatal(err)
			}
			for _, m := range []localsync.Method{localsync.MethodAuto, localsync.MethodCopyRange, localsync.MethodReadWrite} {
				b.Run(m.String(), func(b *testing.B) {
					copyVsCp(b, dir, src, l, localsync.Options{Method: m}, "--sparse=auto")
				})
			}
		})
	}
}

// BenchmarkResync1pct changes 1% of the data blocks of a 1 GiB file with
// 25% data and re-syncs an old copy, against rsync --inplace
// --no-whole-file on an identical old copy. It reports the bytes written
// per changed byte and the wall-time ratio (x_rsync).
func BenchmarkResync1pct(b *testing.B) {
	for _, place := range benchPlaces(b, loopfs.Ext4, loopfs.XFS) {
		inPlace(b, place, func(b *testing.B, dir string) {
			l := scattered("25pct", gib, 25, 9)
			src, ours, theirs := filepath.Join(dir, "src"), filepath.Join(dir, "ours"), filepath.Join(dir, "rsync")
			if err := layout.Write(src, l); err != nil {
				b.Fatal(err)
			}
			var blocks []int64
			for _, d := range l.Data {
				for off := d.Off; off < d.End(); off += 4096 {
					blocks = append(blocks, off)
				}
			}
			nChanged := len(blocks) / 100
			r := rand.New(rand.NewPCG(1, 2))
			var tOurs, tRsync []time.Duration
			var written, changed int64
			buf := make([]byte, 4096)
			b.SetBytes(l.DataBytes())
			b.ReportAllocs()
			load := loadAvg()
			for b.Loop() {
				b.StopTimer()
				for _, p := range []string{ours, theirs} {
					os.Remove(p)
					if _, err := localsync.Copy(b.Context(), src, p, &localsync.Options{Reflink: localsync.ReflinkNever, NoSync: true}); err != nil {
						b.Fatal(err)
					}
				}
				f, err := os.OpenFile(src, os.O_RDWR, 0)
				if err != nil {
					b.Fatal(err)
				}
				for _, i := range r.Perm(len(blocks))[:nChanged] {
					for k := range buf {
						buf[k] = byte(r.Uint32()) | 1
					}
					if _, err := f.WriteAt(buf, blocks[i]); err != nil {
						b.Fatal(err)
					}
				}
				f.Close()
				changed = int64(nChanged) * 4096
				dropCaches(b)
				b.StartTimer()
				t0 := time.Now()
				st, err := localsync.Copy(b.Context(), src, ours, nil)
				if err != nil {
					b.Fatal(err)
				}
				tOurs = append(tOurs, time.Since(t0))
				written = st.CopiedBytes + st.ClonedBytes
				b.StopTimer()
				dropCaches(b)
				tRsync = append(tRsync, run(b, "rsync", "--inplace", "--no-whole-file", "--ignore-times", src, theirs)+run(b, "sync", "-d", theirs))
				if out, _ := exec.Command("cmp", src, theirs).CombinedOutput(); len(out) > 0 {
					b.Fatalf("rsync did not sync: %s", out)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(written)/float64(changed), "written/changed")
			b.ReportMetric(float64(stats.Median(tOurs))/float64(stats.Median(tRsync)), "x_rsync")
			b.ReportMetric(stats.PairedRatio(tOurs, tRsync), "x_rsync_paired")
			b.ReportMetric((load+loadAvg())/2, "load1")
			b.ReportMetric(float64(stats.Median(tRsync).Microseconds())/1000, "rsync_ms")
			b.ReportMetric(float64(stats.Median(tOurs).Microseconds())/1000, "ours_ms")
		})
	}
}

// BenchmarkColdReadWrite: a full read/write copy of a cold source (1 GiB,
// 25% data in extents of 64 KiB to 4 MiB) with cold ranges read directly
// (internal/coldread) against the same copy through the page cache, the
// two interleaved in every iteration, the source's pages dropped
// (FADV_DONTNEED) before each. x_buffered_paired is the median of the
// per-iteration ratios direct/buffered (below 1: direct is faster).
func BenchmarkColdReadWrite(b *testing.B) {
	for _, place := range benchPlaces(b, loopfs.Ext4, loopfs.XFS) {
		inPlace(b, place, func(b *testing.B, dir string) {
			l := scattered("25pct", gib, 25, 9)
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			if err := layout.Write(src, l); err != nil {
				b.Fatal(err)
			}
			opts := localsync.Options{Method: localsync.MethodReadWrite}
			var tDirect, tBuffered []time.Duration
			var direct int64
			b.SetBytes(l.DataBytes())
			load := loadAvg()
			once := func(buffered bool) time.Duration {
				b.StopTimer()
				os.Remove(dst)
				loopfs.DropFile(b, src)
				coldread.Off.Store(buffered)
				defer coldread.Off.Store(false)
				b.StartTimer()
				t0 := time.Now()
				st, err := localsync.Copy(b.Context(), src, dst, &opts)
				if err != nil {
					b.Fatal(err)
				}
				if !buffered {
					direct = st.DirectReadBytes
				}
				return time.Since(t0)
			}
			for i := 0; b.Loop(); i++ {
				d, buf := stats.Pair(i, func() time.Duration { return once(false) }, func() time.Duration { return once(true) })
				tDirect, tBuffered = append(tDirect, d), append(tBuffered, buf)
			}
			b.ReportMetric(stats.PairedRatio(tDirect, tBuffered), "x_buffered_paired")
			b.ReportMetric(float64(stats.Median(tDirect).Microseconds())/1000, "direct_ms")
			b.ReportMetric(float64(stats.Median(tBuffered).Microseconds())/1000, "buffered_ms")
			b.ReportMetric(float64(direct)/float64(l.DataBytes()), "direct/data")
			b.ReportMetric((load+loadAvg())/2, "load1")
			os.Remove(dst)
		})
	}
}
