package bench

import (
	"context"
	"fmt"
	"log/slog"
)

// Scenario names: a full copy to a new file; the others are change scripts.
const ScenarioCopy = "copy"

// Config is a benchmark session. The zero value of each field means the
// documented default; Sparsesync is required.
type Config struct {
	// Workloads to run (names; default all of Workloads() but the OptIn ones).
	Workloads []string
	// Scenarios: "copy" and change script names (default copy and
	// resync-1pct).
	Scenarios []string
	// Peers to compare with (default all of Peers()).
	Peers []string
	// Places are the directories to run in; each gets its own source and
	// target files (required).
	Places []Place
	// Runs is the number of rounds per case (default 3).
	Runs int
	// Gen tunes workload generation (scale, seed).
	Gen GenOptions
	// Sparsesync returns the command that makes dst a copy of src (or
	// re-syncs it), writing a CPU profile to profile when it is not "".
	Sparsesync func(src, dst, profile string) []string
	// SparsesyncServe and SparsesyncPush are sparsesync's network sync,
	// the side network peers (rsync-daemon, ssync) are compared with: a
	// server for root listening on addr (unauthenticated, loopback), and
	// a push of src to remote (a name beneath root) at addr. Unset, the
	// network sparsesync runs are skipped with that reason.
	SparsesyncServe func(root, addr string) []string
	SparsesyncPush  func(src, addr, remote string) []string
	// Profile records a CPU profile of every sparsesync run and
	// summarises them per case.
	Profile bool
	// ProfileDir keeps the profiles (default: removed after summarising).
	ProfileDir string
	// Steady starts sparsesync's local re-syncs from the state a re-sync
	// that runs every night finds: the target its own previous re-sync
	// left, with that sync's quick-check mark and manifest. Before each
	// timed run, untimed, a plain copy of an older version of the source
	// (the scenario's change script applied with another seed) is
	// re-synced by sparsesync to the old version. Without it (the
	// default), every tool starts from a plain copy of the old version
	// and sparsesync's first re-sync of it is measured. Peers keep no
	// state between runs and start from the plain copy either way; the
	// network runs are not affected.
	Steady bool
	// KeepCaches skips making the workload cold before each run.
	KeepCaches bool
	// DropAll drops the machine's whole page cache, dentries and inodes
	// before each run (root only), instead of evicting only the files in
	// the run's scratch directory (the default, as on a real host, where
	// the tools' binaries and libraries stay cached while the images are
	// cold). Run a session both ways to report both cases.
	DropAll bool
	// FloorHoles adds, to every copy case, the tool FloorHoles: the floor
	// with the source's data written at its offsets, its holes kept, as an
	// exact copy must (one contiguous write pays no allocation per extent).
	// It is reported as a tool, so every ratio against it shows beside the
	// peers'.
	FloorHoles bool
	// Progress, if set, is called before each run.
	Progress func(Progress)
	// CaseDone, if set, is called with each case as soon as its rounds
	// are done (the report holds it from then on): results are not lost
	// to a later failure or an interrupt.
	CaseDone func(c Case, done, cases int)
	// Logger receives debug records; nil discards them.
	Logger *slog.Logger
}

// Place is a directory to run in and the name the report gives it.
type Place struct {
	Name string
	Dir  string
}

// Progress says what runs now.
type Progress struct {
	Case, Cases int // 1-based index of the case, and how many there are
	Workload    string
	Scenario    string
	Place       string
	Tool        string
	Round, Runs int // 1-based round
}

func (c *Config) setDefaults() {
	if len(c.Workloads) == 0 {
		for _, w := range Workloads() {
			if !w.OptIn {
				c.Workloads = append(c.Workloads, w.Name)
			}
		}
	}
	if len(c.Scenarios) == 0 {
		c.Scenarios = []string{ScenarioCopy, "resync-1pct"}
	}
	if c.Peers == nil {
		for _, p := range Peers() {
			c.Peers = append(c.Peers, p.Name)
		}
	}
	if c.Runs <= 0 {
		c.Runs = 3
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Preflight checks the configuration (Validate) and that every workload
// can be made (a vm-image tree that fits its image), before anything runs.
// It fills in the defaults of the zero fields first.
func (c *Config) Preflight(ctx context.Context) error {
	c.setDefaults()
	if err := c.Validate(); err != nil {
		return err
	}
	for _, name := range c.Workloads {
		w, _ := WorkloadNamed(name)
		if err := w.Check(ctx, &c.Gen); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks every name in the configuration.
func (c *Config) Validate() error {
	if c.Sparsesync == nil {
		return ErrNoSparsesync
	}
	if len(c.Places) == 0 {
		return fmt.Errorf("bench: no place to run in")
	}
	for _, w := range c.Workloads {
		if _, err := WorkloadNamed(w); err != nil {
			return err
		}
	}
	for _, s := range c.Scenarios {
		if s == ScenarioCopy {
			continue
		}
		if _, err := ChangeNamed(s); err != nil {
			return err
		}
	}
	for _, p := range c.Peers {
		if _, err := PeerNamed(p); err != nil {
			return err
		}
	}
	if c.Runs > 1000 {
		return fmt.Errorf("bench: %d runs is too many (at most 1000)", c.Runs)
	}
	return nil
}

// FloorWays is how many times a round's floor moves the case's data: once
// with O_DIRECT, once through the page cache, once reading directly and
// writing through the cache (floor_linux.go), the fastest kept.
const FloorWays = 3

// FloorHoles names the tool Config.FloorHoles adds.
const FloorHoles = "floor-holes"
