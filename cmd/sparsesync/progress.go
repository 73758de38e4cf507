package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progressBar draws one line — bar, percentage, throughput, ETA — on a
// terminal, redrawn on a ticker from counters the library's Progress
// callback stores. It stays silent for the first delay, so quick copies
// print nothing.
type progressBar struct {
	w           io.Writer
	width       int
	delay       time.Duration
	done, total atomic.Int64
	start       time.Time
	stop        chan struct{}
	wg          sync.WaitGroup
	drawn       bool
}

// startProgress starts drawing on w (width columns) after delay.
func startProgress(w io.Writer, width int, delay time.Duration) *progressBar {
	p := &progressBar{w: w, width: width, delay: delay, start: time.Now(), stop: make(chan struct{})}
	p.wg.Go(p.loop)
	return p
}

// Update stores the counters; it is safe for concurrent use and cheap.
func (p *progressBar) Update(done, total int64) {
	p.total.Store(total)
	for {
		old := p.done.Load()
		if done <= old || p.done.CompareAndSwap(old, done) {
			return
		}
	}
}

func (p *progressBar) loop() {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
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
	fmt.Fprint(p.w, "\r"+p.line(time.Since(p.start)))
	p.drawn = true
}

// line renders the bar for the elapsed time.
func (p *progressBar) line(elapsed time.Duration) string {
	done, total := p.done.Load(), p.total.Load()
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
	tail := fmt.Sprintf(" %3.0f%% %s/%s %s/s ETA %s", frac*100, humanBytes(done), humanBytes(total), humanBytes(int64(rate)), eta)
	barWidth := p.width - len(tail) - 3
	if barWidth < 10 {
		return strings.TrimSpace(tail)
	}
	fill := int(frac * float64(barWidth))
	return "[" + strings.Repeat("=", fill) + strings.Repeat(" ", barWidth-fill) + "]" + tail
}

// Stop stops drawing and clears the line if anything was drawn.
func (p *progressBar) Stop() {
	close(p.stop)
	p.wg.Wait()
	if p.drawn {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", p.width-1)+"\r")
	}
}

// humanBytes formats n with binary units (1.5 GiB).
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
