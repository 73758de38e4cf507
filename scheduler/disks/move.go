package disks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/replica/rebuild"
)

// errSkipped marks a move that was not attempted (reported as a skip event).
var errSkipped = errors.New("skipped")

// errCleanupPending marks a move that committed (the replica lives on its
// target, move-done was reported) but whose cleanup failed; the next start
// finishes it.
var errCleanupPending = errors.New("moved; cleanup pending")

// move executes one planned move (see the package documentation for the
// protocol and why each step is where it is).
func (a *Agent) move(ctx context.Context, m Move, r Replica) error {
	from, to := a.disk(m.From), a.disk(m.To)
	in := &intent{Version: intentVersion, ID: newID(m.Replica), Phase: PhaseCopy, Replica: m.Replica, Volume: m.Volume,
		From: m.From, FromPath: from.Path, To: m.To, ToPath: to.Path, Size: r.Size, Bytes: m.Bytes, Created: a.cfg.Now().UTC()}
	p := pathsOf(in, from, to)
	ev := Event{Replica: m.Replica, Volume: m.Volume, From: m.From, To: m.To, Bytes: m.Bytes}
	skip := func(reason string) error {
		e := ev
		e.Kind, e.Reason = EventSkip, reason
		a.emit(e)
		return errSkipped
	}
	if ok, err := exists(p.dst); err != nil || ok {
		return skip(fmt.Sprintf("disk %q already has an entry named %q", m.To, m.Replica))
	}
	// Hold the replica's directory lock for the whole move: no writer can
	// open it until the move is over (they get replica.ErrBusy), and one
	// that has it open now makes us skip.
	lock, err := flockDir(p.src)
	if errors.Is(err, ErrBusy) {
		return skip("held open by a writer (its directory lock is taken)")
	}
	if errors.Is(err, fs.ErrNotExist) {
		return skip("gone since the disks were measured")
	}
	start := time.Now()
	fail := func(err error) error {
		e := ev
		e.Kind, e.Reason, e.Seconds = EventMoveFailed, err.Error(), time.Since(start).Seconds()
		a.emit(e)
		return err
	}
	if err != nil {
		return fail(err)
	}
	defer lock.Close()

	throttled, err := a.copyAndCommit(ctx, in, p, ev)
	if err != nil {
		// Not committed: the source is authoritative. Undo everything;
		// if even that fails, the record stays and the next start
		// finishes the rollback.
		rerr := a.rollback(in, p)
		switch {
		case ctx.Err() != nil && rerr == nil:
			err = fmt.Errorf("interrupted, rolled back: the replica stays on %s: %w", m.From, err)
		case ctx.Err() != nil:
			err = fmt.Errorf("interrupted; the rollback is incomplete, the next start completes it (%v): %w", rerr, err)
		case rerr != nil:
			err = fmt.Errorf("%w (rollback incomplete, the next start completes it: %v)", err, rerr)
		}
		return fail(err)
	}
	e := ev
	e.Kind = EventMoveDone
	if err := a.cleanup(in, p); err != nil {
		// Committed: the replica lives at its new home whatever
		// happens now, so this is a move done, not failed. What is
		// left (the retired source, the record) is garbage the next
		// start removes.
		a.cfg.Logger.Warn("disks: moved, but cleaning up failed; the next start completes it",
			"replica", m.Replica, "from", m.From, "to", m.To, "err", err)
		e.Reason = "moved; cleaning up failed, the next start completes it: " + err.Error()
		e.Seconds = time.Since(start).Seconds()
		e.ThrottledSeconds = throttled.Seconds()
		a.emit(e)
		return fmt.Errorf("%w: %w", errCleanupPending, err)
	}
	a.step("cleaned")
	e.Seconds = time.Since(start).Seconds()
	e.ThrottledSeconds = throttled.Seconds()
	a.emit(e)
	return nil
}

// copyAndCommit runs the move up to its commit point. It returns an error
// only before the commit. Nothing in it needs space on the source disk:
// the record and the copy are on the target, and retiring the source is a
// rename into the source's AgentDir, which exists and is nearly empty.
// It returns how long the copy waited on the budget.
func (a *Agent) copyAndCommit(ctx context.Context, in *intent, p movePaths, ev Event) (throttled time.Duration, err error) {
	// The source's AgentDir normally exists (New made it); if New could
	// not make it (the disk was full already), making it now may fail
	// too, before anything was copied.
	if err := ensureAgentDir(p.fromDisk); err != nil {
		return throttled, fmt.Errorf("no agent directory on the source disk to retire the replica into: %w", err)
	}
	if err := mkdirSynced(p.moveDir); err != nil {
		return throttled, err
	}
	if err := writeIntent(p.moveDir, in); err != nil {
		return throttled, fmt.Errorf("writing the move record: %w", err)
	}
	a.step("intent")
	e := ev
	e.Kind = EventMoveStart
	e.Progress = func() (int64, int64) {
		n, _ := dirAllocated(p.staging)
		return n, in.Bytes
	}
	a.emit(e)
	a.step("copy")
	// We hold the source's lock (no writer can change it); Rebuild reads
	// it in place under that lock.
	st, err := rebuild.Rebuild(ctx, p.src, p.staging,
		&rebuild.Options{Logger: a.cfg.Logger, SourceLocked: true, Budget: a.cfg.Budget})
	if err != nil {
		return throttled, err
	}
	for _, f := range st.Files {
		throttled += f.Throttled
	}
	a.step("copied")
	if err := sameReplica(p.src, p.staging); err != nil {
		return throttled, err
	}
	if err := syncDir(p.moveDir); err != nil {
		return throttled, err
	}
	// Retire the source before the commit, while we hold its lock: from
	// here on no writer can find it by its name, so none can write to a
	// directory the commit is about to make stale.
	if err := os.Rename(p.src, p.retired); err != nil {
		return throttled, err
	}
	if err := syncDirs(p.fromDisk, filepath.Dir(p.retired)); err != nil {
		return throttled, err
	}
	a.step("retired")
	in.Phase = PhaseCommit
	if err := writeIntent(p.moveDir, in); err != nil {
		in.Phase = PhaseCopy
		return throttled, fmt.Errorf("committing the move record: %w", err)
	}
	a.step("committed")
	return throttled, nil
}

// sameReplica checks that the copy describes the replica the source does:
// size, chain, counter mode, revision and epoch (Rebuild has compared every
// file's bytes already).
func sameReplica(src, dst string) error {
	si, err := replica.Inspect(src, nil)
	if err != nil {
		return err
	}
	di, err := replica.Inspect(dst, nil)
	if err != nil {
		return err
	}
	rev := func(i replica.Info) int64 {
		if i.Revision == nil {
			return -1
		}
		return *i.Revision
	}
	if si.Size != di.Size || !slices.Equal(si.Chain, di.Chain) || si.CounterEnabled != di.CounterEnabled ||
		rev(si) != rev(di) || si.Epoch != di.Epoch {
		return fmt.Errorf("%w: %s: size %d chain %v revision %d epoch %d; source %s: size %d chain %v revision %d epoch %d",
			ErrMismatch, dst, di.Size, di.Chain, rev(di), di.Epoch, src, si.Size, si.Chain, rev(si), si.Epoch)
	}
	return nil
}

func syncDirs(dirs ...string) error {
	for _, d := range dirs {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

func removeAll(p string) error {
	if err := os.RemoveAll(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// rollback undoes a move that did not commit: the copy goes, the retired
// source (if it was retired) returns to its name, then the record goes.
// Every step is idempotent, so a rollback interrupted by a crash is
// finished by the next start.
func (a *Agent) rollback(in *intent, p movePaths) error {
	// A failed commit may have left a record saying commit: say copy
	// again before the copy goes, or a crash in between would leave a
	// record pointing at a copy that no longer exists.
	if ok, err := exists(filepath.Join(p.moveDir, IntentFile)); err != nil {
		return err
	} else if ok && in.Phase != PhaseCopy {
		c := *in
		c.Phase = PhaseCopy
		if err := writeIntent(p.moveDir, &c); err != nil {
			return err
		}
	}
	if err := removeAll(p.staging); err != nil {
		return err
	}
	if err := syncDir(p.moveDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	a.step("unstaged")
	switch _, err := settle(p.retired, p.src, filepath.Dir(p.retired), p.fromDisk); {
	case errors.Is(err, errBoth):
		return fmt.Errorf("%w: move %s: both %s and the retired source %s exist; leaving both", ErrRecovery, in.ID, p.src, p.retired)
	case errors.Is(err, errNeither):
		return fmt.Errorf("%w: move %s: replica %s is neither at %s nor retired at %s", ErrRecovery, in.ID, in.Replica, p.src, p.retired)
	case err != nil:
		return err
	}
	return a.dropRecord(p)
}

// cleanup finishes a committed move: the copy takes the replica's name on
// the target disk (if it has not yet), then the retired source and the
// record go. Idempotent like rollback.
func (a *Agent) cleanup(in *intent, p movePaths) error {
	switch moved, err := settle(p.staging, p.dst, p.moveDir, p.toDisk); {
	case errors.Is(err, errBoth):
		return fmt.Errorf("%w: move %s: both %s and the committed copy %s exist; leaving both", ErrRecovery, in.ID, p.dst, p.staging)
	case errors.Is(err, errNeither):
		return fmt.Errorf("%w: move %s: committed copy of %s is neither at %s nor at %s", ErrRecovery, in.ID, in.Replica, p.staging, p.dst)
	case err != nil:
		return err
	case moved:
		a.step("placed")
	}
	if err := removeAll(p.retired); err != nil {
		return fmt.Errorf("removing the retired source: %w", err)
	}
	if err := syncDir(filepath.Dir(p.retired)); err != nil {
		return err
	}
	return a.dropRecord(p)
}

// errBoth and errNeither are settle's refusals, which its callers name.
var (
	errBoth    = errors.New("both exist")
	errNeither = errors.New("neither exists")
)

// settle is the rename step of rollback and cleanup, made idempotent: the
// replica directory stands at from or at to (never both, never neither)
// and ends at to, renamed and dirs synced when it was at from; moved says
// whether it was.
func settle(from, to string, dirs ...string) (moved bool, err error) {
	atFrom, err := exists(from)
	if err != nil {
		return false, err
	}
	atTo, err := exists(to)
	switch {
	case err != nil:
		return false, err
	case atFrom && atTo:
		return false, errBoth
	case !atFrom && !atTo:
		return false, errNeither
	case atTo:
		return false, nil
	}
	if err := os.Rename(from, to); err != nil {
		return false, err
	}
	return true, syncDirs(dirs...)
}

// dropRecord removes the record, then the move's directory (empty by now
// but for a temporary record). AgentDir stays.
func (a *Agent) dropRecord(p movePaths) error {
	if err := os.Remove(filepath.Join(p.moveDir, IntentFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := syncDir(p.moveDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := removeAll(p.moveDir); err != nil {
		return err
	}
	return syncDir(p.agent)
}
