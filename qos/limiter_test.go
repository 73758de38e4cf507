package qos

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"
)

const mib = 1 << 20

type admission struct {
	at     time.Duration
	worker int
	n      int64
}

// runShared has workers take bytes from their limiters one Piece at a time
// for the given virtual duration, and returns every admission. between
// runs while every worker sleeps, with the virtual time elapsed so far.
func runShared(t *testing.T, c *simClock, limiters []*Limiter, d time.Duration, between func(time.Duration)) []admission {
	t.Helper()
	var mu sync.Mutex
	var got []admission
	for i, l := range limiters {
		go func() {
			defer c.done()
			for c.elapsed() < d {
				p := l.Piece()
				if p == 0 {
					t.Error("a limited limiter has no piece size")
					return
				}
				if err := l.Wait(context.Background(), p); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, admission{c.elapsed(), i, p})
				mu.Unlock()
			}
		}()
	}
	for c.step(func() {
		if between != nil {
			between(c.elapsed())
		}
	}) {
	}
	sort.Slice(got, func(i, j int) bool { return got[i].at < got[j].at })
	return got
}

// worstWindow is the most bytes admitted in any one-second window that
// starts at or after from, counting only the workers keep accepts.
func worstWindow(adm []admission, from time.Duration, keep func(int) bool) int64 {
	worst := int64(0)
	for i, a := range adm {
		if a.at < from {
			continue
		}
		sum := int64(0)
		for _, b := range adm[i:] {
			if b.at >= a.at+time.Second {
				break
			}
			if keep == nil || keep(b.worker) {
				sum += b.n
			}
		}
		worst = max(worst, sum)
	}
	return worst
}

func TestSharedLimiterHoldsItsRate(t *testing.T) {
	const rate, workers, secs = 10 * mib, 4, 20
	c := newSimClock(workers)
	l := newLimiterOn(c, rate)
	ls := make([]*Limiter, workers)
	for i := range ls {
		ls[i] = l
	}
	adm := runShared(t, c, ls, secs*time.Second, nil)

	if w := worstWindow(adm, 0, nil); w > rate*11/10 {
		t.Errorf("%d bytes admitted in one second, limit %d (+10%% burst)", w, rate)
	}
	per := make([]int64, workers)
	total := int64(0)
	for _, a := range adm {
		if a.at < secs*time.Second {
			per[a.worker] += a.n
			total += a.n
		}
	}
	if total < rate*secs*95/100 {
		t.Errorf("%d bytes in %d s at %d B/s: the limiter held the workers below their rate", total, secs, rate)
	}
	for i, n := range per {
		if share := total / workers; n < share*8/10 || n > share*12/10 {
			t.Errorf("worker %d got %d bytes, a fair share is %d (all: %v)", i, n, share, per)
		}
	}
	if l.Waited() == 0 {
		t.Error("workers held back by the limit, yet no waiting was counted")
	}
}

func TestSetRateInForceWithinASecond(t *testing.T) {
	const rate = 8 * mib
	c := newSimClock(2)
	l := newLimiterOn(c, rate)
	changed := time.Duration(0)
	adm := runShared(t, c, []*Limiter{l, l}, 20*time.Second, func(el time.Duration) {
		if changed == 0 && el >= 10*time.Second {
			l.SetRate(rate / 2)
			changed = el
		}
	})
	if changed == 0 {
		t.Fatal("the rate was never changed")
	}
	if w := worstWindow(adm, changed+time.Second, nil); w > rate/2*11/10 {
		t.Errorf("a second after the rate was halved, %d bytes in one second (limit %d)", w, rate/2)
	}
	if got := l.Rate(); got != rate/2 {
		t.Errorf("Rate() = %d, want %d", got, rate/2)
	}
	late := int64(0)
	for _, a := range adm {
		if a.at >= changed+time.Second && a.at < changed+6*time.Second {
			late += a.n
		}
	}
	if late < rate/2*5*95/100 {
		t.Errorf("%d bytes in the 5 s after the change, want about %d", late, rate/2*5)
	}
}

func TestChildHeldToItsOwnAndItsParentsRate(t *testing.T) {
	const node, own = 10 * mib, 2 * mib
	c := newSimClock(3)
	parent := newLimiterOn(c, node)
	slow := parent.Child(own)
	free1, free2 := parent.Child(0), parent.Child(0)
	adm := runShared(t, c, []*Limiter{slow, free1, free2}, 20*time.Second, nil)
	if w := worstWindow(adm, 0, func(w int) bool { return w == 0 }); w > own*11/10 {
		t.Errorf("the child limited to %d B/s took %d bytes in one second", own, w)
	}
	if w := worstWindow(adm, 0, nil); w > node*11/10 {
		t.Errorf("children together took %d bytes in one second, their parent's limit is %d", w, node)
	}
	if w := worstWindow(adm, time.Second, func(w int) bool { return w == 0 }); w < own*9/10 {
		t.Errorf("the slow child got %d bytes in its busiest second, its own limit is %d: the others starved it", w, own)
	}
}

func TestWaitSpreadsALargeRequest(t *testing.T) {
	const rate = 4 * mib
	c := newSimClock(1)
	l := newLimiterOn(c, rate)
	go func() {
		defer c.done()
		if err := l.Wait(context.Background(), 5*rate); err != nil {
			t.Error(err)
		}
	}()
	for c.step(nil) {
	}
	if el := c.elapsed(); el < 4900*time.Millisecond {
		t.Errorf("5 s of bytes admitted in %v", el)
	}
}

func TestUnlimited(t *testing.T) {
	var nilL *Limiter
	for _, l := range []*Limiter{nilL, NewLimiter(0), NewLimiter(-1)} {
		if p := l.Piece(); p != 0 {
			t.Errorf("unlimited limiter has piece %d", p)
		}
		if err := l.Wait(context.Background(), 1<<40); err != nil {
			t.Error(err)
		}
		if l.Rate() != 0 || l.Waited() != 0 {
			t.Errorf("unlimited limiter: rate %d, waited %v", l.Rate(), l.Waited())
		}
	}
	var b Budget
	if b.Limited() {
		t.Error("the zero Budget says it is limited")
	}
	if !NewBudget(1).Limited() {
		t.Error("NewBudget(1) says it is not limited")
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	l := NewLimiter(minPiece) // 4 KiB/s: 1 MiB would take four minutes
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if err := l.Wait(ctx, mib); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	// The piece being waited for was given back: after raising the rate the
	// bucket is not in debt for it.
	l.SetRate(0)
	if err := l.Wait(context.Background(), mib); err != nil {
		t.Fatal(err)
	}
}
