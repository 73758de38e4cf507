package main

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"
)

// progressBar draws a one-line bar on w from atomic counters, on a ticker,
// until stop is called. It is drawn only when w is a terminal or forced.
type progressBar struct {
	w     io.Writer
	label string
	done  func() (done, total, wire int64)
	stopC chan struct{}
	ended atomic.Bool
	fin   chan struct{}
}

func startProgress(w io.Writer, label string, force bool, done func() (int64, int64, int64)) *progressBar {
	p := &progressBar{w: w, label: label, done: done, stopC: make(chan struct{}), fin: make(chan struct{})}
	if !force && !isTerminal(w) {
		close(p.fin)
		p.ended.Store(true)
		return p
	}
	go func() {
		defer close(p.fin)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-t.C:
				p.draw(start)
			case <-p.stopC:
				p.draw(start)
				fmt.Fprintln(p.w)
				return
			}
		}
	}()
	return p
}

func (p *progressBar) draw(start time.Time) {
	d, total, wire := p.done()
	frac := 0.0
	if total > 0 {
		frac = min(1, float64(d)/float64(total))
	}
	width := max(10, min(40, terminalWidth(p.w, 80)-60))
	n := int(frac * float64(width))
	rate := float64(d) / max(time.Since(start).Seconds(), 1e-3)
	fmt.Fprintf(p.w, "\r%s [%s%s] %3.0f%% %s/%s %s/s wire %s ", p.label, strings.Repeat("=", n), strings.Repeat(" ", width-n),
		frac*100, humanBytes(d), humanBytes(total), humanBytes(int64(rate)), humanBytes(wire))
}

func (p *progressBar) stop() {
	if p.ended.Swap(true) {
		return
	}
	close(p.stopC)
	<-p.fin
}
