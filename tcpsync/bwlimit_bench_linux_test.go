package tcpsync

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/qos"
)

// The QoS benchmarks report rates over one-second windows as fractions of
// a limit; none asserts anything (speed is never a test's to judge). The
// bytes counted are the client's data sent (Progress.Done), sampled every
// 10 ms, so what is judged is what moved. Run:
//
//	go test -run '^$' -bench 'Bwlimit|ServerBudget' -benchtime 1x -v ./tcpsync

// BenchmarkBwlimitPush pushes about five seconds of data at client limits
// of 10, 50 and 200 MiB/s into an unlimited server: the median window
// (want within 5% of 1) and the busiest (want at most 1.2).
func BenchmarkBwlimitPush(b *testing.B) {
	dir := b.TempDir()
	addr, _ := startServer(b, dir, nil)
	for _, mibps := range []int64{10, 50, 200} {
		rate := mibps << 20
		src := filepath.Join(dir, fmt.Sprintf("src-%d", mibps))
		writeBenchData(b, src, 5*rate)
		b.Run(fmt.Sprintf("limit=%dMiB", mibps), func(b *testing.B) {
			var med, worst []float64
			for i := range b.N {
				o := benchOpts()
				o.Budget = qos.NewBudget(rate)
				s := newSampler(o.Progress.Done.Load)
				if _, err := PushFile(b.Context(), addr, src, fmt.Sprintf("dst-%d-%d", mibps, i), o); err != nil {
					b.Fatal(err)
				}
				w := s.stop().windows(rate)
				b.Logf("windows/limit: %.3f", w)
				med, worst = append(med, medianOf(w)), append(worst, slices.Max(w))
			}
			b.ReportMetric(medianOf(med), "median-window/limit")
			b.ReportMetric(slices.Max(worst), "max-window/limit")
			b.ReportMetric(benchLoad(), "load")
		})
	}
}

// BenchmarkServerBudgetShared runs two and four concurrent pushes into one
// server whose node-wide Budget is 100 MiB/s: the sum's windows against
// the limit (want within 5%), and each session's median window against
// its fair share, the limit over the sessions (want within 20%). The
// halve case lowers the limit to 50 MiB/s with SetRate three seconds into
// two pushes and reports the windows around it: the first whole window
// after the change is at the new rate when it is in force within a second.
func BenchmarkServerBudgetShared(b *testing.B) {
	const limit = 100 << 20
	for _, c := range []struct {
		name     string
		sessions int
		halve    bool
	}{{"sessions=2", 2, false}, {"sessions=4", 4, false}, {"sessions=2/halve-at-3s", 2, true}} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			budget := qos.NewBudget(limit)
			addr, _ := startServer(b, dir, func(s *Server) { s.Budget = budget })
			per := int64(6*limit) / int64(c.sessions)
			srcs := make([]string, c.sessions)
			for i := range srcs {
				srcs[i] = filepath.Join(dir, fmt.Sprintf("src-%d", i))
				writeBenchData(b, srcs[i], per)
			}
			for n := range b.N {
				budget.SetRate(limit)
				written := newSampler(budget.Write.Bytes)
				samplers := make([]*sampler, c.sessions)
				var wg sync.WaitGroup
				errs := make([]error, c.sessions)
				for i := range srcs {
					o := benchOpts()
					samplers[i] = newSampler(o.Progress.Done.Load)
					wg.Go(func() {
						_, errs[i] = PushFile(b.Context(), addr, srcs[i], fmt.Sprintf("dst-%d-%d", n, i), o)
					})
				}
				var changed time.Duration
				if c.halve {
					time.Sleep(3 * time.Second)
					budget.SetRate(limit / 2)
					changed = time.Since(written.start)
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				for _, s := range samplers {
					s.stop()
				}
				// The sum: what the server wrote (its budget's count), and
				// what the clients sent, merged on one clock (its first
				// window holds the socket buffers filling: megabytes the
				// server takes at its pace later).
				sumW := written.stop().windows(limit)
				b.Logf("server writes, windows/limit: %.3f", sumW)
				b.Logf("clients' sum, windows/limit: %.3f", sumWindows(samplers, limit))
				if c.halve {
					at := int(changed / time.Second) // the window holding the change
					b.Logf("limit halved at %.2fs: windows/old limit before %.3f, after %.3f", changed.Seconds(), sumW[:at], sumW[at:])
					if at+1 < len(sumW) {
						b.ReportMetric(sumW[at+1]*2, "first-whole-window-after/new-limit")
					}
					if at+2 < len(sumW) {
						b.ReportMetric(medianOf(sumW[at+1:])*2, "median-after/new-limit")
					}
					b.ReportMetric(medianOf(sumW[:at]), "median-before/limit")
				} else {
					b.ReportMetric(medianOf(sumW), "sum-median-window/limit")
					b.ReportMetric(slices.Max(sumW), "sum-max-window/limit")
					fair := float64(limit) / float64(c.sessions)
					worst := 0.0
					for i, s := range samplers {
						w := s.windows(int64(fair))
						// Only the windows when all sessions ran: the
						// shortest session's.
						w = w[:min(len(w), shortest(samplers))]
						b.Logf("session %d windows/fair share: %.3f", i, w)
						worst = max(worst, abs(medianOf(w)-1))
					}
					b.ReportMetric(worst, "worst-session-median-off-fair-share")
				}
			}
			b.ReportMetric(benchLoad(), "load")
		})
	}
}

func benchOpts() *Options {
	o := clientOpts()
	o.ReadBack, o.Compress, o.Progress = ReadBackOff, CompressNone, new(Progress)
	return o
}

// writeBenchData writes n bytes of non-zero data (zero blocks would move
// as markers, not data).
func writeBenchData(b *testing.B, path string, n int64) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*131 | 1)
	}
	for off := int64(0); off < n; off += int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), n-off)]); err != nil {
			b.Fatal(err)
		}
	}
}

// sampler records a count every 10 ms: a client's Progress.Done, or what
// the server's budget admitted.
type sampler struct {
	start   time.Time
	mu      sync.Mutex
	at      []time.Duration
	done    []int64
	quit    chan struct{}
	stopped sync.WaitGroup
}

func newSampler(count func() int64) *sampler {
	s := &sampler{start: time.Now(), quit: make(chan struct{})}
	s.stopped.Go(func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
			s.mu.Lock()
			s.at = append(s.at, time.Since(s.start))
			s.done = append(s.done, count())
			s.mu.Unlock()
		}
	})
	return s
}

func (s *sampler) stop() *sampler {
	close(s.quit)
	s.stopped.Wait()
	return s
}

// doneBy is the bytes done by t (the last sample at or before it).
func (s *sampler) doneBy(t time.Duration) int64 {
	i, _ := slices.BinarySearch(s.at, t+1)
	if i == 0 {
		return 0
	}
	return s.done[i-1]
}

// windows are the bytes done in each whole second, over rate; the last,
// partial second is left out.
func (s *sampler) windows(rate int64) []float64 {
	var w []float64
	if len(s.at) == 0 {
		return w
	}
	for t := time.Second; t <= s.at[len(s.at)-1]; t += time.Second {
		w = append(w, float64(s.doneBy(t)-s.doneBy(t-time.Second))/float64(rate))
	}
	return w
}

// sumWindows are the windows of all sessions' bytes together, over the
// first session's clock, up to the end of the last.
func sumWindows(ss []*sampler, rate int64) []float64 {
	end := time.Duration(0)
	for _, s := range ss {
		if len(s.at) > 0 {
			end = max(end, s.at[len(s.at)-1]+s.start.Sub(ss[0].start))
		}
	}
	var w []float64
	for t := time.Second; t <= end; t += time.Second {
		var n int64
		for _, s := range ss {
			off := s.start.Sub(ss[0].start)
			n += s.doneBy(t-off) - s.doneBy(t-time.Second-off)
		}
		w = append(w, float64(n)/float64(rate))
	}
	return w
}

func shortest(ss []*sampler) int {
	n := -1
	for _, s := range ss {
		if l := len(s.windows(1)); n < 0 || l < n {
			n = l
		}
	}
	return max(n, 1)
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := slices.Clone(v)
	slices.Sort(c)
	return c[len(c)/2]
}

func abs(x float64) float64 { return max(x, -x) }

func benchLoad() float64 {
	var l float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &l)
	}
	return l
}
