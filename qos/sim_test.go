package qos

import (
	"context"
	"sync"
	"time"
)

// simClock is a discrete-event clock for limiter tests: time stands still
// while any worker runs, and moves to the earliest wake-up once every
// worker sleeps. Each worker's bytes are admitted at the virtual instant
// its Wait returns, which is exactly what the limiter promised.
type simClock struct {
	mu       sync.Mutex
	cond     *sync.Cond
	now      time.Time
	sleepers []sleeper
	running  int // workers neither asleep nor finished
}

type sleeper struct {
	wake time.Time
	ch   chan struct{}
}

func newSimClock(workers int) *simClock {
	c := &simClock{now: time.Unix(1_000_000, 0), running: workers}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *simClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *simClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	s := sleeper{wake: c.now.Add(d), ch: make(chan struct{})}
	c.sleepers = append(c.sleepers, s)
	c.running--
	c.cond.Broadcast()
	c.mu.Unlock()
	<-s.ch
	return ctx.Err()
}

// done marks one worker finished.
func (c *simClock) done() {
	c.mu.Lock()
	c.running--
	c.cond.Broadcast()
	c.mu.Unlock()
}

// elapsed is the virtual time since the clock's start.
func (c *simClock) elapsed() time.Duration {
	return c.Now().Sub(time.Unix(1_000_000, 0))
}

// step waits until every worker sleeps or has finished, then wakes the
// earliest sleepers at their wake time. It returns false when no worker is
// left asleep. between runs with every worker asleep, before time moves.
func (c *simClock) step(between func()) bool {
	c.mu.Lock()
	for c.running > 0 {
		c.cond.Wait()
	}
	if len(c.sleepers) == 0 {
		c.mu.Unlock()
		return false
	}
	if between != nil {
		c.mu.Unlock()
		between()
		c.mu.Lock()
	}
	first := c.sleepers[0].wake
	for _, s := range c.sleepers {
		if s.wake.Before(first) {
			first = s.wake
		}
	}
	c.now = first
	keep := c.sleepers[:0]
	var wake []chan struct{}
	for _, s := range c.sleepers {
		if s.wake.Equal(first) {
			wake = append(wake, s.ch)
		} else {
			keep = append(keep, s)
		}
	}
	c.sleepers = keep
	c.running += len(wake)
	c.mu.Unlock()
	for _, ch := range wake {
		close(ch)
	}
	return true
}
