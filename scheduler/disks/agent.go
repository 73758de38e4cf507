package disks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sparsesync/sparsesync/internal/bytesize"
)

// Event kinds.
const (
	EventPressure   = "pressure"    // a disk is under pressure (From)
	EventMoveStart  = "move-start"  // a move began
	EventMoveDone   = "move-done"   // a move committed; the replica lives on To (a Reason says the cleanup was left to the next start)
	EventMoveFailed = "move-failed" // a move failed and was rolled back; the replica lives on From
	EventSkip       = "skip"        // a planned move (or a replica) was left alone, Reason says why
	EventHeld       = "held"        // a disk under pressure gives up no replica this pass (From), Reason says why (the planner's)
	EventIgnored    = "ignored"     // a directory beneath a disk (Replica: its name) is not a replica; Reason says what it is
	EventPass       = "pass"        // a pass ended: Reason sums it up, Bytes is what it moved
)

// Event is what the agent reports, one per decision or outcome.
type Event struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"event"`
	Replica string    `json:"replica"`
	Volume  string    `json:"volume"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Bytes   int64     `json:"bytes"`
	Seconds float64   `json:"seconds"`
	Reason  string    `json:"reason"`
	// ThrottledSeconds, on move-done, is how long the move's copy waited
	// on Config.Budget.
	ThrottledSeconds float64 `json:"throttled_seconds,omitempty"`
	// Progress, on move-start only, samples the move's progress: the
	// bytes the copy occupies so far and the replica's allocated bytes.
	// It is safe to call from any goroutine until the move's next event.
	Progress func() (done, total int64) `json:"-"`
}

// PassResult is what one pass measured and did.
type PassResult struct {
	Disks   []DiskState
	Planned []Move
	// Moved are the moves completed (move-done: the replica lives on its
	// target); Failed those rolled back (move-failed: it lives on its
	// source); Skipped those not attempted (writer, name clash, dry run).
	Moved, Failed, Skipped []Move
	// CleanupPending are the moves of Moved whose cleanup failed after
	// the commit: the replica lives on its target, but the retired source
	// or the record is still there; the next start removes them.
	CleanupPending []Move
	// BytesMoved sums the allocated bytes of the moved replicas.
	BytesMoved int64
	// Held counts the disks under pressure that give up no replica (each
	// reported in a held event with the planner's reason).
	Held int
}

// summary is the pass event's text: what was measured, planned and done.
func (r PassResult) summary(err error) string {
	pressured, replicas := 0, 0
	for _, d := range r.Disks {
		replicas += d.Replicas
		if d.Pressured {
			pressured++
		}
	}
	s := fmt.Sprintf("%d disks, %d replicas, %d under pressure: %d planned, %d moved (%s), %d failed, %d skipped, %d held",
		len(r.Disks), replicas, pressured, len(r.Planned), len(r.Moved), bytesize.Format(r.BytesMoved), len(r.Failed), len(r.Skipped), r.Held)
	if err != nil {
		s += "; interrupted"
	}
	return s
}

// Agent balances the disks of one node. Create it with [New], run passes
// with [Agent.Pass] or [Agent.Run], and [Agent.Close] it. An Agent is for
// one goroutine at a time; it holds every configured disk (a second agent
// on any of them fails with ErrAgentRunning) until Close.
type Agent struct {
	cfg   Config
	locks []*os.File
	// emitMu makes the events of concurrent moves reach OnEvent one at a
	// time.
	emitMu sync.Mutex
}

// New validates cfg, takes every disk, and completes or rolls back every
// move a previous agent left interrupted (see the package documentation),
// all before anything moves. On any error nothing was moved.
func New(cfg Config) (*Agent, error) {
	cfg.Disks = append([]DiskConfig(nil), cfg.Disks...)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	a := &Agent{cfg: cfg}
	for _, d := range cfg.Disks {
		l, err := flockDir(d.Path)
		if errors.Is(err, ErrBusy) {
			a.Close()
			return nil, fmt.Errorf("disk %q: %s: %w", d.Name, d.Path, ErrAgentRunning)
		}
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("disk %q: %w", d.Name, err)
		}
		a.locks = append(a.locks, l)
	}
	if err := a.recover(); err != nil {
		a.Close()
		return nil, err
	}
	// Every disk keeps AgentDir, so that one that fills up later can
	// still retire a replica (see AgentDir). A disk already too full for
	// it is reported, not refused: moves off it fail until it is made.
	for _, d := range cfg.Disks {
		if cfg.DryRun {
			break
		}
		if err := ensureAgentDir(d.Path); err != nil {
			cfg.Logger.Warn("disks: cannot make the agent directory; moves off this disk fail until it exists",
				"disk", d.Name, "path", filepath.Join(d.Path, AgentDir), "err", err)
		}
	}
	return a, nil
}

// Close releases the disks.
func (a *Agent) Close() error {
	var errs []error
	for _, l := range a.locks {
		errs = append(errs, l.Close())
	}
	a.locks = nil
	return errors.Join(errs...)
}

func (a *Agent) emit(e Event) {
	a.emitMu.Lock()
	defer a.emitMu.Unlock()
	if e.Time.IsZero() {
		e.Time = a.cfg.Now()
	}
	a.cfg.Logger.Debug("disks: "+e.Kind, "replica", e.Replica, "from", e.From, "to", e.To, "reason", e.Reason)
	if a.cfg.OnEvent != nil {
		a.cfg.OnEvent(e)
	}
}

func (a *Agent) step(name string) {
	if a.cfg.step != nil {
		a.cfg.step(name)
	}
}

func (a *Agent) disk(name string) DiskConfig {
	for _, d := range a.cfg.Disks {
		if d.Name == name {
			return d
		}
	}
	return DiskConfig{}
}

// Pass measures every disk, plans with scheduler/longhorn's disk-pressure
// rule (at most one move off each pressured disk) and executes the moves in
// plan order, at most Config.MaxConcurrentMoves at a time. A move that fails is rolled back and reported; the pass goes on.
// The error is for what stops the pass itself: a disk that cannot be
// measured, a cancelled ctx.
func (a *Agent) Pass(ctx context.Context) (PassResult, error) {
	var res PassResult
	states, moves, reps, held, err := a.plan(ctx)
	if err != nil {
		return res, err
	}
	res.Disks, res.Planned, res.Held = states, moves, len(held)
	defer func() { a.emit(Event{Kind: EventPass, Bytes: res.BytesMoved, Reason: res.summary(ctx.Err())}) }()
	for _, st := range states {
		if st.Pressured {
			free := max(st.AvailableBytes-st.ReservedBytes, 0)
			reserve := ""
			if st.ReservedBytes > 0 {
				reserve = " after a reserve of " + bytesize.Format(st.ReservedBytes)
			}
			a.emit(Event{Kind: EventPressure, From: st.Name, Bytes: free,
				Reason: fmt.Sprintf("%s of %s free%s, below %d%%",
					pct(free, st.MaxBytes), bytesize.Format(st.MaxBytes), reserve, 100-*a.cfg.PressurePercent)})
		}
	}
	for _, st := range states {
		// The planner explains the disks it holds that have replicas; one
		// with none (its space taken by other files, or its replicas not
		// where the agent looks: see the ignored events) is said too.
		if st.Pressured && st.Replicas == 0 {
			res.Held++
			a.emit(Event{Kind: EventHeld, From: st.Name,
				Reason: "no replica directory on the disk to move: its space is used by other files (see any ignored directories)"})
		}
	}
	for _, h := range held {
		reason := h.Reason
		if s := h.Summary(); s != "" {
			reason += ": " + s
		}
		a.emit(Event{Kind: EventHeld, From: h.Disk, Replica: h.Replica, Volume: h.Volume, Reason: reason})
	}
	if a.cfg.DryRun {
		for _, m := range moves {
			a.emit(Event{Kind: EventSkip, Replica: m.Replica, Volume: m.Volume, From: m.From, To: m.To, Bytes: m.Bytes,
				Reason: "dry run: the planner would move it"})
			res.Skipped = append(res.Skipped, m)
		}
		return res, nil
	}
	errs := a.runMoves(ctx, moves, reps)
	for i, m := range moves {
		switch err := errs[i]; {
		case err == errNotStarted:
		case err == nil || errors.Is(err, errCleanupPending):
			res.Moved = append(res.Moved, m)
			res.BytesMoved += m.Bytes
			if err != nil {
				res.CleanupPending = append(res.CleanupPending, m)
			}
		case errors.Is(err, errSkipped):
		default:
			res.Failed = append(res.Failed, m)
		}
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	for _, m := range moves {
		if !contains(res.Moved, m) && !contains(res.Failed, m) && !contains(res.Skipped, m) {
			res.Skipped = append(res.Skipped, m)
		}
	}
	return res, nil
}

// errNotStarted marks a planned move that a cancelled pass never began.
var errNotStarted = errors.New("not started")

// runMoves executes moves, at most cfg.MaxConcurrentMoves at a time, in
// plan order, and returns each move's error (errNotStarted for those a
// cancelled ctx kept from starting).
func (a *Agent) runMoves(ctx context.Context, moves []Move, reps map[string]Replica) []error {
	errs := make([]error, len(moves))
	for i := range errs {
		errs[i] = errNotStarted
	}
	if a.cfg.MaxConcurrentMoves <= 1 {
		// One at a time, on the pass's goroutine.
		for i, m := range moves {
			if ctx.Err() != nil {
				break
			}
			errs[i] = a.move(ctx, m, reps[m.Replica])
		}
		return errs
	}
	slots := make(chan struct{}, a.cfg.MaxConcurrentMoves)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var panicked any // a move's panic, raised again on the pass's goroutine
	for i, m := range moves {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					mu.Lock()
					panicked = p
					mu.Unlock()
				}
				<-slots
			}()
			errs[i] = a.move(ctx, m, reps[m.Replica])
		})
	}
	wg.Wait()
	if panicked != nil {
		panic(panicked)
	}
	return errs
}

func contains(ms []Move, m Move) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// Run runs passes: one when interval is 0, else one every interval until
// ctx is done (it then returns ctx's error). after, when set, sees every
// pass's result.
func (a *Agent) Run(ctx context.Context, interval time.Duration, after func(PassResult)) error {
	for {
		res, err := a.Pass(ctx)
		if after != nil {
			after(res)
		}
		if err != nil {
			return err
		}
		if interval <= 0 {
			return nil
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func pct(part, whole int64) string {
	if whole <= 0 {
		return "0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}
