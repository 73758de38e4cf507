package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sparsesync/sparsesync/internal/manifest"
	"github.com/sparsesync/sparsesync/sparse"
)

// Run runs the benchmark session cfg describes and returns its report. A
// peer that is not installed, or cannot work on a place, is skipped with
// the reason in the report; a tool whose run fails keeps the error in the
// report and the session goes on. Run returns an error only when the
// session itself cannot go on (a workload cannot be made, ctx is done).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.setDefaults()
	if err := cfg.Preflight(ctx); err != nil {
		return nil, err
	}
	rep := &Report{Version: ReportVersion, Started: time.Now().UTC(), Host: hostInfo(), Runs: cfg.Runs}
	rep.Host.CPUs = runtime.NumCPU()
	rep.Host.Go = runtime.Version()
	switch {
	case cfg.KeepCaches:
		rep.Host.Evict = "none"
	case cfg.DropAll:
		if rep.Host.DropCaches = dropCaches(); rep.Host.DropCaches {
			rep.Host.Evict = "all"
		} else {
			rep.Host.Evict = "none"
		}
	default:
		rep.Host.DropCaches, rep.Host.Evict = true, "files"
	}
	s := &session{cfg: &cfg, rep: rep, cases: len(cfg.Workloads) * len(cfg.Places) * len(cfg.Scenarios)}
	if p, err := exec.LookPath("time"); err == nil && isGNUTime(p) {
		s.timePath = p
		rep.Host.PeakRSS = "GNU time (fork, wait4 ru_maxrss of the tool)"
	} else {
		rep.Host.PeakRSS = "not measured: GNU time (Debian package time) not found"
	}
	for _, wname := range cfg.Workloads {
		w, _ := WorkloadNamed(wname)
		for _, pl := range cfg.Places {
			if err := s.workload(ctx, w, pl); err != nil {
				return rep, err
			}
		}
	}
	rep.Finished = time.Now().UTC()
	rep.Host.Load1End = loadAvg()
	return rep, nil
}

type session struct {
	// timePath is GNU time, which measures a child's peak RSS exactly
	// (our own children's maxrss includes this process's, see timeMaxRSS).
	timePath string
	cfg      *Config
	rep      *Report
	cases    int
	done     int
}

// workload runs every scenario of w in one place, in a scratch directory
// removed afterwards.
func (s *session) workload(ctx context.Context, w Workload, pl Place) error {
	dir, err := os.MkdirTemp(pl.Dir, "sparsesync-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	base := filepath.Join(dir, "src-"+w.Name)
	s.cfg.Logger.Debug("generating workload", "workload", w.Name, "path", base)
	if err := w.Generate(ctx, base, &s.cfg.Gen); err != nil {
		return err
	}
	for _, sc := range s.cfg.Scenarios {
		c := Case{Workload: w.Name, Scenario: sc, Place: pl.Name, Dir: pl.Dir, FSType: fsType(dir)}
		src, old, prior := base, "", ""
		if sc != ScenarioCopy {
			ch, _ := ChangeNamed(sc)
			src, old = filepath.Join(dir, "src-"+w.Name+"-"+sc), base
			if err := copyFile(base, src); err != nil {
				return err
			}
			n, err := ch.Apply(ctx, src, s.cfg.Gen.seed())
			if err != nil {
				return err
			}
			c.ChangedBytes = n
			if s.cfg.Steady {
				// The version before old, for sparsesync's untimed re-sync.
				prior = filepath.Join(dir, "prior-"+w.Name+"-"+sc)
				if err := copyFile(base, prior); err != nil {
					return err
				}
				if _, err := ch.Apply(ctx, prior, s.cfg.Gen.seed()+1); err != nil {
					return err
				}
				c.Steady = true
			}
		}
		err := s.runCase(ctx, &c, dir, src, old, prior)
		if prior != "" {
			os.Remove(prior)
		}
		if err != nil {
			return err
		}
		s.rep.Cases = append(s.rep.Cases, c)
		if s.cfg.CaseDone != nil {
			s.cfg.CaseDone(c, len(s.rep.Cases), s.cases)
		}
		if src != base {
			os.Remove(src)
			os.Remove(src + ".bmap")
		}
	}
	return nil
}

// copyFile copies src to dst with its holes and no shared blocks, durably:
// the old version of a target, or a source to change.
func copyFile(src, dst string) error {
	if err := run("cp", "--reflink=never", "--sparse=always", src, dst); err != nil {
		return err
	}
	return syncFS(dst)
}

// runCase runs the rounds of one case. old is the target's version before
// the change ("" for a copy to a new file); prior, when not "", the version
// before old (Config.Steady).
func (s *session) runCase(ctx context.Context, c *Case, dir, src, old, prior string) error {
	s.done++
	m, _, err := sparse.ReadMap(ctx, src)
	if err != nil {
		return err
	}
	c.Size, c.DataBytes = m.Size(), m.Bytes()
	dst := filepath.Join(dir, "dst")
	c.DeviceStats = deviceStat(dir) != ""

	profDir := s.cfg.ProfileDir
	if s.cfg.Profile && profDir == "" {
		profDir, err = os.MkdirTemp("", "sparsesync-bench-prof-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(profDir)
	}
	tools := []tool{{name: "sparsesync", syncs: true, argv: s.cfg.Sparsesync, keepsState: prior != ""}}
	var proxy *wireProxy
	for _, name := range s.cfg.Peers {
		p, _ := PeerNamed(name)
		if p.Network && proxy == nil {
			if proxy, err = newWireProxy(); err != nil {
				return err
			}
			defer proxy.Close()
			tools = append(tools, sparsesyncNetTool(s.cfg, proxy.Port()))
		}
		client := 0
		if proxy != nil {
			client = proxy.Port()
		}
		tools = append(tools, peerTool(p, c.FSType, client))
	}
	if s.cfg.FloorHoles && old == "" {
		tools = append(tools, tool{name: FloorHoles, floor: true, keepHoles: true})
	}
	floor := tool{name: "floor", floor: true}
	c.Floor = Tool{Name: "floor", Command: "reads of the source's data (and the old target's, for a re-sync) with a queue of 16 1 MiB requests, " +
		"overlapping writes of the bytes to change to a new file, then fdatasync: once with O_DIRECT, once through the page cache, " +
		"once reading with O_DIRECT and writing through the page cache (the workload evicted before each), the fastest kept"}
	c.Tools = make([]Tool, len(tools))
	for i, t := range tools {
		c.Tools[i] = Tool{Name: t.name, Command: t.command(), Skipped: t.skip, Network: t.network}
		if t.skip == "" && t.prepare != nil {
			if err := t.prepare(src); err != nil {
				c.Tools[i].Skipped = "preparing: " + err.Error()
			}
		}
	}
	writeBytes := c.DataBytes
	if old != "" {
		writeBytes = c.ChangedBytes
	}
	var profiles []string
	all := append([]tool{floor}, tools...)
	for round := range s.cfg.Runs {
		for k := range all {
			i := (k + round) % len(all) // no tool always first
			t := all[i]
			res := &c.Floor
			if i > 0 {
				res = &c.Tools[i-1]
			}
			if res.Skipped != "" || res.Error != "" {
				continue
			}
			if s.cfg.Progress != nil {
				s.cfg.Progress(Progress{Case: s.done, Cases: s.cases, Workload: c.Workload, Scenario: c.Scenario,
					Place: c.Place, Tool: t.name, Round: round + 1, Runs: s.cfg.Runs})
			}
			prof := ""
			if s.cfg.Profile && t.name == "sparsesync" {
				prof = filepath.Join(profDir, fmt.Sprintf("%s-%s-%s-%d.pprof", c.Workload, c.Scenario, c.Place, round))
			}
			r, err := s.runOne(ctx, t, src, old, prior, dst, dir, writeBytes, prof, proxy)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				res.Error = fmt.Sprintf("round %d: %v", round+1, err)
				s.cfg.Logger.Debug("tool failed", "tool", t.name, "err", err)
				continue
			}
			if round == 0 && !t.floor {
				if err := sameContent(ctx, src, dst); errors.Is(err, ErrResultDiffers) {
					res.WrongResult = err.Error()
				} else if err != nil {
					res.Error = fmt.Sprintf("round 1: checking the result: %v", err)
				}
			}
			r.Round, r.Order = round, k
			res.Runs = append(res.Runs, r)
			if prof != "" {
				profiles = append(profiles, prof)
			}
		}
	}
	os.Remove(dst)
	c.finish()
	if len(profiles) > 0 {
		sum, err := SummarizeProfiles(profiles, 12)
		if err != nil {
			c.Tools[0].Error = "profile: " + err.Error()
		} else {
			c.Tools[0].Profile = sum
		}
	}
	return nil
}

// runOne resets the target, makes the workload cold (Host.Evict) and runs
// t once.
func (s *session) runOne(ctx context.Context, t tool, src, old, prior, dst, dir string, writeBytes int64, prof string, proxy *wireProxy) (Sample, error) {
	os.Remove(dst)
	os.Remove(dst + ".tcpsync")   // sparsesync serve's record of the last push: each run starts without it
	os.Remove(manifest.Path(dst)) // and local's manifest, unless the run keeps state
	switch {
	case old != "" && t.keepsState:
		// The target as the tool's own last re-sync (prior to old) left it.
		if err := copyFile(prior, dst); err != nil {
			return Sample{}, fmt.Errorf("restoring the target's older version: %w", err)
		}
		argv := t.argv(old, dst, "")
		if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return Sample{}, fmt.Errorf("re-syncing the older target: %s: %w: %s", strings.Join(argv, " "), err, firstLine(out))
		}
	case old != "":
		if err := copyFile(old, dst); err != nil {
			return Sample{}, fmt.Errorf("restoring the old target: %w", err)
		}
	}
	if err := syncFS(dir); err != nil {
		return Sample{}, err
	}
	if err := s.evict(dir); err != nil {
		return Sample{}, err
	}
	if t.floor {
		reads := []string{src}
		if old != "" {
			reads = append(reads, dst)
		}
		return s.floorSample(ctx, reads, dir, writeBytes, t.keepHoles)
	}
	stat := deviceStat(dir)
	before, readBefore := deviceWritten(stat), deviceRead(stat)
	r := Sample{WireBytes: -1, BusyCPU: -1}
	busyBefore := busyCPU()
	{
		var daemon *daemonProc
		if t.daemon != nil {
			if t.prepareDaemon != nil {
				if err := t.prepareDaemon(dst); err != nil {
					return Sample{}, err
				}
			}
			var err error
			if daemon, err = startDaemon(ctx, t, dst, freePort); err != nil {
				return Sample{}, err
			}
			proxy.reset(daemon.Addr())
		}
		argv := t.argv(src, dst, prof)
		usage := filepath.Join(dir, "usage.txt")
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		if s.timePath != "" {
			cmd = exec.CommandContext(ctx, s.timePath, append([]string{"-f", "%M %U %S", "-o", usage}, argv...)...)
		}
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if daemon != nil {
			switch {
			case err == nil && t.daemonStays:
				// Serving on: stop it; its exit status is the signal's.
				_ = daemon.cmd.Process.Signal(syscall.SIGTERM)
				_ = daemon.wait()
			case err == nil:
				if err = daemon.wait(); err != nil && t.daemonDone != nil && t.daemonDone(err, daemon.out.Bytes()) {
					err = nil
				}
				if err != nil {
					err = fmt.Errorf("daemon: %w: %s", err, firstLine(daemon.out.Bytes()))
				}
			default:
				daemon.kill()
			}
			r.WireBytes = proxy.count()
		}
		if err == nil && !t.syncs {
			err = syncFS(dst)
		}
		r.Wall = time.Since(start).Seconds()
		r.BusyCPU = busySince(busyBefore)
		if err != nil {
			return Sample{}, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, firstLine(out))
		}
		r.User, r.Sys, r.PeakRSS = childUsage(cmd.ProcessState)
		r.PeakRSS = 0 // the child's maxrss counts ours: Go starts children with vfork
		if s.timePath != "" {
			r.PeakRSS = timeMaxRSS(usage)
			os.Remove(usage)
		}
		if daemon != nil {
			u, sy, rss := childUsage(daemon.cmd.ProcessState)
			r.User, r.Sys = r.User+u, r.Sys+sy
			_ = rss
		}
	}
	r.DeviceWritten, r.DeviceRead = deviceSince(dir, stat, before, readBefore)
	return r, nil
}

// evict makes the workload cold as Host.Evict says.
func (s *session) evict(dir string) error {
	switch s.rep.Host.Evict {
	case "all":
		dropCaches()
	case "files":
		return evictFiles(dir)
	}
	return nil
}

// deviceSince syncs dir's filesystem (so that every write of the run
// counts, however late) and returns the bytes its device (stat) wrote and
// read since the counts before and readBefore; -1 for a count unknown.
func deviceSince(dir, stat string, before, readBefore int64) (written, read int64) {
	_ = syncFS(dir)
	written, read = -1, -1
	if after := deviceWritten(stat); before >= 0 && after >= before {
		written = after - before
	}
	if after := deviceRead(stat); readBefore >= 0 && after >= readBefore {
		read = after - readBefore
	}
	return written, read
}

// floorSample measures the floor every way (floorWays) and keeps the
// fastest: each is a bound on what the devices allow, so the lowest is the
// tightest.
func (s *session) floorSample(ctx context.Context, reads []string, dir string, writeBytes int64, keepHoles bool) (Sample, error) {
	all, err := s.floorSamples(ctx, reads, dir, writeBytes, keepHoles)
	if err != nil {
		return Sample{}, err
	}
	best := all[0]
	for _, r := range all[1:] {
		if r.Wall < best.Wall {
			best = r
		}
	}
	return best, nil
}

// floorSamples measures the floor each way of floorWays, in that order,
// the workload made cold again before each; each sample has its own way's
// device counts.
func (s *session) floorSamples(ctx context.Context, reads []string, dir string, writeBytes int64, keepHoles bool) ([FloorWays]Sample, error) {
	var all [FloorWays]Sample
	for i, way := range floorWays {
		if i > 0 {
			if err := s.evict(dir); err != nil {
				return all, err
			}
		}
		stat := deviceStat(dir)
		before, readBefore := deviceWritten(stat), deviceRead(stat)
		busyBefore := busyCPU()
		fr, err := measureFloor(ctx, reads, filepath.Join(dir, "floor.out"), writeBytes, way, keepHoles)
		if err != nil {
			return all, fmt.Errorf("floor: %w", err)
		}
		r := Sample{Wall: fr.wall.Seconds(), BusyCPU: busySince(busyBefore), WireBytes: -1, FloorMethod: way.String()}
		r.DeviceWritten, r.DeviceRead = deviceSince(dir, stat, before, readBefore)
		all[i] = r
	}
	return all, nil
}

// busySince returns the machine's busy CPU seconds since before (from
// busyCPU), or -1 when either reading failed.
func busySince(before float64) float64 {
	after := busyCPU()
	if before < 0 || after < before {
		return -1
	}
	return after - before
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// sameContent checks that b has a's bytes and size: it compares the union
// of both files' data extents (outside it both read as zeros).
func sameContent(ctx context.Context, a, b string) error {
	sa, sb, off, err := sparse.DiffFiles(ctx, a, b, nil)
	if err != nil {
		return err
	}
	if sa != sb {
		return fmt.Errorf("%w: size %d, want %d", ErrResultDiffers, sb, sa)
	}
	if off >= 0 {
		return fmt.Errorf("%w at offset %d", ErrResultDiffers, off)
	}
	return nil
}

// isGNUTime reports whether the program at p is GNU time (it takes -f and -o).
func isGNUTime(p string) bool {
	out, err := exec.Command(p, "--version").CombinedOutput()
	return err == nil && strings.Contains(string(out), "GNU")
}

// timeMaxRSS reads the peak RSS GNU time wrote (its last line: "%M %U %S",
// KiB first), in bytes; 0 when unknown. GNU time forks the tool with
// fork(2), so the tool's ru_maxrss is its own. Go starts children with
// vfork (CLONE_VM), and Linux carries the parent's high-water RSS into the
// child's maxrss at exec: measured directly, every tool would show at
// least this process's RSS.
func timeMaxRSS(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 1 {
		return 0
	}
	kib, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0
	}
	return kib * 1024
}
