package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparsesync/sparsesync/internal/bytesize"
)

// progressCounter is the one shape in which progress reaches the bar:
// counters it samples on its ticks. A library that reports through a
// callback (localsync.Options.Progress) calls update; tcpsync.Progress and
// the file samplers (replica rebuild and export) are read the same way.
type progressCounter struct {
	done, total, wire atomic.Int64
}

// update stores the counters; it is safe for concurrent use and cheap, and
// never moves the done counter backwards.
func (c *progressCounter) update(done, total int64) {
	c.total.Store(total)
	for {
		old := c.done.Load()
		if done <= old || c.done.CompareAndSwap(old, done) {
			return
		}
	}
}

// sample reads the counters (a startProgress sample function).
func (c *progressCounter) sample() (done, total, wire int64) {
	return c.done.Load(), c.total.Load(), c.wire.Load()
}

// progressBar draws one line — label, bar, percentage, throughput, ETA and,
// for network syncs, wire bytes — redrawn on a ticker from a sample
// function polled on every tick. It stays silent for the first delay, so
// quick operations print nothing, and clears its line when stopped.
type progressBar struct {
	w      io.Writer
	label  string
	width  int
	delay  time.Duration
	sample func() (done, total, wire int64)
	shown  progressCounter // the last sample
	start  time.Time
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex // orders drawing and Println on w
	drawn  bool
	// stopAtTotal clears the bar for good once done reaches total (a
	// phase with a known end, followed by one without: bench's fill).
	stopAtTotal bool
	finished    bool
}

// progressEnabled decides from --progress auto|always|never whether to draw on w.
func progressEnabled(mode string, w io.Writer) (bool, error) {
	switch mode {
	case "auto", "": // "" is the zero value of options built in code
		return isTerminal(w), nil
	case "always":
		return true, nil
	case "never":
		return false, nil
	}
	return false, usageError{fmt.Errorf("--progress: unknown value %q (want auto, always or never)", mode)}
}

// sampleFunc reports a bar's done and total bytes and the wire bytes.
type sampleFunc = func() (done, total, wire int64)

// startBar is every command's bar set-up: --progress (mode) decides whether
// to draw on g.stderr; if so, sampler is called (it may wire counters into
// the command's options) and its sample is drawn after delay. A nil sample
// means nothing can be watched. The bar is nil (a no-op) when none is drawn.
func (g *globalOpts) startBar(mode, label string, delay time.Duration, sampler func() sampleFunc, opts ...func(*progressBar)) (*progressBar, error) {
	show, err := progressEnabled(mode, g.stderr)
	if err != nil || !show {
		return nil, err
	}
	sample := sampler()
	if sample == nil {
		return nil, nil
	}
	return startProgress(g.stderr, label, terminalWidth(g.stderr, 80), delay, sample, opts...), nil
}

// startProgress starts drawing on w (width columns) after delay, from
// sample (a progressCounter's, or counters a library exposes).
func startProgress(w io.Writer, label string, width int, delay time.Duration, sample func() (done, total, wire int64), opts ...func(*progressBar)) *progressBar {
	p := &progressBar{w: w, label: label, width: width, delay: delay, sample: sample, start: time.Now(), stop: make(chan struct{})}
	for _, o := range opts {
		o(p)
	}
	p.wg.Go(p.loop)
	return p
}

// clearAtTotal makes a bar clear itself for good once done reaches total:
// a phase with a known end followed by one without (bench's fill).
func clearAtTotal(p *progressBar) { p.stopAtTotal = true }

func (p *progressBar) loop() {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	if p.delay <= 0 {
		p.draw() // no quiet time: show it at once
	}
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			if time.Since(p.start) >= p.delay {
				p.draw()
			}
		}
	}
}

func (p *progressBar) draw() {
	done, total, wire := p.sample()
	p.shown.update(done, total)
	p.shown.wire.Store(wire)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	if done, total, _ := p.shown.sample(); p.stopAtTotal && total > 0 && done >= total {
		p.clear()
		p.finished = true
		return
	}
	fmt.Fprint(p.w, "\r"+p.line(time.Since(p.start)))
	p.drawn = true
}

// Println prints s as a line of its own: the bar is cleared first and
// redrawn on the next tick. A nil bar prints to w directly.
func (p *progressBar) Println(w io.Writer, s string) {
	if p == nil {
		fmt.Fprintln(w, s)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintln(p.w, s)
}

// clear erases the drawn bar; p.mu is held.
func (p *progressBar) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", max(p.width-1, 0))+"\r")
		p.drawn = false
	}
}

// line renders the bar for the elapsed time.
func (p *progressBar) line(elapsed time.Duration) string {
	done, total, wire := p.shown.sample()
	frac := 1.0
	if total > 0 {
		frac = min(float64(done)/float64(total), 1)
	}
	rate := float64(done) / max(elapsed.Seconds(), 1e-9)
	eta := "--"
	if rate > 0 && done < total {
		eta = time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second).String()
	} else if done >= total {
		eta = "0s"
	}
	tail := fmt.Sprintf(" %3.0f%% %s/%s %s/s ETA %s", frac*100, bytesize.Format(done), bytesize.Format(total), bytesize.Format(int64(rate)), eta)
	if total == 0 && done == 0 {
		tail, frac = " starting", 0 // not connected yet, or nothing known to move
	}
	if wire > 0 {
		tail += " wire " + bytesize.Format(wire)
	}
	head := ""
	if p.label != "" {
		head = p.label + " "
	}
	barWidth := p.width - len(head) - len(tail) - 3
	if barWidth < 10 {
		return strings.TrimSpace(head + tail)
	}
	fill := int(frac * float64(barWidth))
	return head + "[" + strings.Repeat("=", fill) + strings.Repeat(" ", barWidth-fill) + "]" + tail
}

// Stop stops drawing and clears the line if anything was drawn.
// A nil bar (progress off) is fine to stop.
func (p *progressBar) Stop() {
	if p == nil {
		return
	}
	close(p.stop)
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
}
