package disks

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pending is an interrupted move found at start.
type pending struct {
	in   *intent
	from DiskConfig
	to   DiskConfig
}

// recover completes or rolls back every move a previous agent left: with a
// record in phase commit the copy is authoritative and the move is
// completed; otherwise the source is and the move is undone. The records
// lie on the moves' target disks, so every configured disk is read.
// Everything is examined first; if anything cannot be decided (a record
// whose source disk is not configured, a retired source or a move
// directory with no record on any configured disk) nothing is touched and
// the error says what and where.
func (a *Agent) recover() error {
	var todo []pending
	type dirRef struct{ disk, id, path string }
	var dirs, retired []dirRef
	records := map[string]pending{}
	for _, d := range a.cfg.Disks {
		agent := filepath.Join(d.Path, AgentDir)
		ents, err := os.ReadDir(agent)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("disk %q: %w", d.Name, err)
		}
		for _, e := range ents {
			if id, ok := strings.CutPrefix(e.Name(), RetiredPrefix); ok {
				retired = append(retired, dirRef{d.Name, id, filepath.Join(agent, e.Name())})
				continue
			}
			dirs = append(dirs, dirRef{d.Name, e.Name(), filepath.Join(agent, e.Name())})
			path := filepath.Join(agent, e.Name(), IntentFile)
			in, err := readIntent(path)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			// The record lies on the move's target disk, whatever it
			// is called now; the source is found by name, else path.
			from, ok := a.resolve(in.From, in.FromPath)
			if !ok {
				return fmt.Errorf("%w: move record %s: its source disk %q (%s) is not configured; configure it so the move can be finished",
					ErrRecovery, path, in.From, in.FromPath)
			}
			if from.Name == d.Name {
				return fmt.Errorf("%w: move record %s: its source disk %q is the disk the record lies on", ErrRecovery, path, in.From)
			}
			t := pending{in: in, from: from, to: d}
			todo = append(todo, t)
			records[in.ID] = t
		}
	}
	// A retired source belongs to a record naming its disk as the source;
	// without one the replica's authoritative copy is unknown (the record
	// is on a disk that is not configured).
	for _, r := range retired {
		if t, ok := records[r.id]; !ok || t.from.Name != r.disk {
			return fmt.Errorf("%w: %s is a replica directory retired by move %s, but no move record for it from disk %q is on any configured disk (is the move's target disk configured?)",
				ErrRecovery, r.path, r.id, r.disk)
		}
	}
	// Directories without a record: a move interrupted before its record
	// was written (nothing in them but a temporary record) is garbage;
	// anything else the protocol does not leave.
	var garbage []string
	for _, r := range dirs {
		if _, ok := records[r.id]; ok {
			continue
		}
		ents, err := os.ReadDir(r.path)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if e.Name() != IntentFile+".tmp" {
				return fmt.Errorf("%w: %s holds %s but no move record %s", ErrRecovery, r.path, e.Name(), IntentFile)
			}
		}
		garbage = append(garbage, r.path)
	}
	if a.cfg.DryRun {
		// Report what a real start would do, change nothing.
		for _, t := range todo {
			what := "rolled back (it had not committed)"
			if t.in.Phase == PhaseCommit {
				what = "completed (it had committed)"
			}
			a.emit(Event{Kind: EventSkip, Replica: t.in.Replica, Volume: t.in.Volume, From: t.in.From, To: t.in.To,
				Bytes: t.in.Bytes, Reason: "dry run: an interrupted move would be " + what})
		}
		return nil
	}
	for _, g := range garbage {
		if err := removeAll(g); err != nil {
			return err
		}
		if err := syncDir(filepath.Dir(g)); err != nil {
			return err
		}
	}
	for _, t := range todo {
		p := pathsOf(t.in, t.from, t.to)
		ev := Event{Replica: t.in.Replica, Volume: t.in.Volume, From: t.in.From, To: t.in.To, Bytes: t.in.Bytes}
		start := time.Now()
		var err error
		if t.in.Phase == PhaseCommit {
			err = a.cleanup(t.in, p)
			ev.Kind, ev.Reason = EventMoveDone, "interrupted move completed at start (it had committed)"
		} else {
			err = a.rollback(t.in, p)
			ev.Kind, ev.Reason = EventMoveFailed, "interrupted move rolled back at start (it had not committed)"
		}
		if err != nil {
			return fmt.Errorf("recovering move %s of %s: %w", t.in.ID, t.in.Replica, err)
		}
		ev.Seconds = time.Since(start).Seconds()
		a.emit(ev)
	}
	return nil
}

// resolve finds a configured disk by name, else by path.
func (a *Agent) resolve(name, path string) (DiskConfig, bool) {
	for _, d := range a.cfg.Disks {
		if d.Name == name {
			return d, true
		}
	}
	for _, d := range a.cfg.Disks {
		if path != "" && filepath.Clean(d.Path) == filepath.Clean(path) {
			return d, true
		}
	}
	return DiskConfig{}, false
}
