package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/sparsesync/sparsesync/internal/bytesize"
	"github.com/sparsesync/sparsesync/qos"
	"github.com/sparsesync/sparsesync/scheduler/disks"
)

// disksOpts are the flags of "sparsesync disks".
type disksOpts struct {
	// metricsReady, if set, is called with the bound --metrics address
	// (tests).
	metricsReady     func(addr string)
	disks            []string
	config           string
	concurrentMoves  int
	node             string
	pressure         int64
	antiAffinity     string
	minimalAvailable int64
	overProvisioning int64
	once             bool
	interval         time.Duration
	dryRun           bool
	json             bool
	metrics          string
	progress         string
	qos              qosFlags
	rateFile         string
}

func newDisksCommand(g *globalOpts) *cobra.Command {
	opts := &disksOpts{}
	cmd := &cobra.Command{
		Use:   "disks --disk NAME=PATH[,OPTION...] ... [--once | --interval D] [flags]",
		Short: "Node agent: move replica directories off disks under pressure, safely",
		Long: `disks balances the replica directories of one node's disks. Each pass measures
every disk (statfs) and replica (replica.Inspect), asks the Longhorn planner
(the disk-pressure rule "plan rebalance" applies) which replicas to move, at
most one off each disk under pressure, and moves them with replica rebuild:
reflink where both disks share a filesystem, else copy_file_range or
read/write, every file verified before the source is retired. Each move
keeps an intent record on the target disk, and the agent keeps a directory
.sparsesync-disks on every disk (empty between moves), so that a move needs
no space on its source, which may be full; a move interrupted by a crash is
completed or rolled back when the agent starts again, before anything else.
A replica held open by a writer is skipped.

A disk is NAME=PATH, PATH holding replica directories, optionally followed by
,reserved=BYTES (Longhorn's storageReserved; K, M, G, T suffixes are binary),
,no-scheduling (never a target) and ,allow-root-fs (PATH may be on the root
filesystem). Otherwise PATH must be on a mounted filesystem other than the
root one: neither its st_dev nor the filesystem of the mount holding it
(/proc/self/mountinfo; a btrfs subvolume or a bind mount of the root counts
as the root) may be the root's. Disks may share a filesystem. Make PATH a
directory inside the mounted disk (/mnt/d1/replicas), so that it is missing,
and refused, when the disk is not mounted. --config FILE reads the same
as JSON: {"node": "...", "disks": [{"name", "path", "reserved_bytes",
"no_scheduling", "allow_root_fs"}], "pressure_percent", "hard_anti_affinity",
"max_concurrent_moves"};
flags given on the command line win.

--json prints one event per line: {"time", "event": "pressure"|"move-start"|
"move-done"|"move-failed"|"skip"|"held"|"ignored"|"pass", "replica", "volume", "from", "to", "bytes",
"seconds", "reason", "throttled_seconds"}. move-done: the replica lives on "to" (a reason says
when the cleanup after the commit failed and is left to the next start);
move-failed: the move was rolled back, the replica lives on "from" (an
interrupted move says so). held: a disk under pressure ("from") gives up no
replica this pass, with the planner's reason; ignored: a directory beneath
a disk that is not a replica (a disk given as its mount point names the
directory one level down to give instead); pass: one per pass, its reason
sums it up. --metrics ADDR serves Prometheus metrics at
http://ADDR/metrics while the agent runs (among them
sparsesync_bwlimit_bytes_per_second and sparsesync_throttled_seconds_total).

Moves run one at a time; --max-concurrent-moves N lets up to N of a pass's
moves run at once (Longhorn's concurrent-replica-rebuild-per-node-limit).
--bwlimit RATE caps the moves' reads and writes together, each to RATE on
its own, a budget the concurrent moves share ("throttled_seconds" of
move-done says how long a move waited); --config may give it as "bwlimit": "RATE" (the flag wins).
--bwlimit-file FILE reads the RATE from FILE instead, at start and on every
SIGHUP, which applies it to a move already running within a tenth of a
second; a file that cannot be read or holds no valid RATE is reported and
the old limit kept. --ionice sets the agent's I/O priority.

Examples:
  sparsesync disks --disk d1=/mnt/d1/replicas --disk d2=/mnt/d2/replicas --once --dry-run
  sparsesync disks --config /etc/sparsesync/disks.json --interval 1m --json --metrics :9470
` + exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDisks(cmd.Context(), g, opts, cmd.Flags().Changed)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&opts.disks, "disk", nil, "a disk: NAME=PATH[,reserved=BYTES][,no-scheduling][,allow-root-fs] (repeatable)")
	f.StringVar(&opts.config, "config", "", "JSON configuration file (see above)")
	f.StringVar(&opts.node, "node", "", "node name in events and the planner's model (default: the host name)")
	f.Int64Var(&opts.pressure, "pressure-percent", 90, "disk pressure threshold T: a disk is under pressure below 100-T % free; 0 turns moves off")
	f.StringVar(&opts.antiAffinity, "disk-anti-affinity", "soft", "soft: prefer disks without a replica of the volume; hard: never share one")
	f.Int64Var(&opts.minimalAvailable, "minimal-available-percent", 25, "Longhorn's storage-minimal-available-percentage for targets")
	f.Int64Var(&opts.overProvisioning, "over-provisioning-percent", 100, "Longhorn's storage-over-provisioning-percentage for targets")
	f.BoolVar(&opts.once, "once", false, "run one pass and exit (the default without --interval)")
	f.DurationVar(&opts.interval, "interval", 0, "run a pass every interval until interrupted")
	f.BoolVar(&opts.dryRun, "dry-run", false, "plan and report, change nothing")
	f.IntVar(&opts.concurrentMoves, "max-concurrent-moves", 1, "moves of a pass that may run at once (they share --bwlimit)")
	f.BoolVar(&opts.json, "json", false, "print events as JSON, one object per line")
	f.StringVar(&opts.metrics, "metrics", "", "serve Prometheus metrics on ADDR (host:port)")
	f.StringVar(&opts.progress, "progress", "auto", "progress bar per move on stderr: auto (on a terminal), always or never")
	opts.qos.register(f)
	f.StringVar(&opts.rateFile, "bwlimit-file", "", "read the --bwlimit RATE from this file, again on SIGHUP")
	return cmd
}

// disksConfig builds the agent's configuration from --config and flags.
func disksConfig(opts *disksOpts, changed func(string) bool) (disks.Config, error) {
	var file struct {
		disks.Config
		Bwlimit string `json:"bwlimit"` // a RATE, as --bwlimit takes it
	}
	cfg := &file.Config
	if opts.config != "" {
		b, err := os.ReadFile(opts.config)
		if err != nil {
			return *cfg, err
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&file); err != nil {
			return *cfg, fmt.Errorf("%s: %w", opts.config, err)
		}
		if file.Bwlimit != "" && !changed("bwlimit") {
			if _, err := qos.ParseRate(file.Bwlimit); err != nil {
				return *cfg, usageError{fmt.Errorf("%s: bwlimit: %w", opts.config, err)}
			}
			opts.qos.bwlimit = file.Bwlimit
		}
	}
	for _, s := range opts.disks {
		d, err := parseDisk(s)
		if err != nil {
			return *cfg, usageError{err}
		}
		cfg.Disks = append(cfg.Disks, d)
	}
	if opts.node != "" {
		cfg.Node = opts.node
	} else if cfg.Node == "" {
		cfg.Node, _ = os.Hostname()
	}
	if changed("pressure-percent") || cfg.PressurePercent == nil {
		cfg.PressurePercent = &opts.pressure
	}
	switch opts.antiAffinity {
	case "soft":
		if changed("disk-anti-affinity") {
			cfg.HardAntiAffinity = false
		}
	case "hard":
		cfg.HardAntiAffinity = true
	default:
		return *cfg, usageError{fmt.Errorf("--disk-anti-affinity: unknown value %q (want soft or hard)", opts.antiAffinity)}
	}
	if changed("minimal-available-percent") || cfg.MinimalAvailablePercent == nil {
		cfg.MinimalAvailablePercent = &opts.minimalAvailable
	}
	if changed("over-provisioning-percent") || cfg.OverProvisioningPercent == nil {
		cfg.OverProvisioningPercent = &opts.overProvisioning
	}
	if changed("max-concurrent-moves") || cfg.MaxConcurrentMoves == 0 {
		cfg.MaxConcurrentMoves = opts.concurrentMoves
	}
	cfg.DryRun = cfg.DryRun || opts.dryRun
	if len(cfg.Disks) == 0 {
		return *cfg, usageError{errors.New("no disks: give --disk NAME=PATH (at least two) or --config FILE")}
	}
	return *cfg, nil
}

// parseDisk parses NAME=PATH[,reserved=BYTES][,no-scheduling][,allow-root-fs].
func parseDisk(s string) (disks.DiskConfig, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" || rest == "" {
		return disks.DiskConfig{}, fmt.Errorf("--disk %q: want NAME=PATH", s)
	}
	parts := strings.Split(rest, ",")
	d := disks.DiskConfig{Name: name, Path: parts[0]}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		switch k {
		case "reserved":
			n, err := bytesize.Parse(v)
			if err != nil {
				return d, fmt.Errorf("--disk %q: reserved: %w", s, err)
			}
			d.ReservedBytes = n
		case "no-scheduling":
			d.NoScheduling = true
		case "allow-root-fs":
			d.AllowRootFS = true
		default:
			return d, fmt.Errorf("--disk %q: unknown option %q (want reserved=BYTES, no-scheduling or allow-root-fs)", s, p)
		}
	}
	return d, nil
}

func runDisks(ctx context.Context, g *globalOpts, opts *disksOpts, changed func(string) bool) error {
	if opts.once && opts.interval != 0 {
		return usageError{errors.New("--once and --interval are exclusive")}
	}
	if opts.interval < 0 {
		return usageError{fmt.Errorf("--interval %v is negative", opts.interval)}
	}
	if opts.metrics != "" {
		if err := checkAddr("--metrics", opts.metrics); err != nil {
			return err
		}
	}
	cfg, err := disksConfig(opts, changed)
	if err != nil {
		return err
	}
	show, err := progressEnabled(opts.progress, g.stderr)
	if err != nil {
		return err
	}
	budget, err := opts.qos.nodeBudget(opts.rateFile)
	if err != nil {
		return err
	}
	cfg.Budget = budget
	reg := newRegistry()
	m := newDisksMetrics(reg, budget.Wire.Rate)
	out := &disksPrinter{g: g, json: opts.json, bars: show}
	cfg.OnEvent = func(e disks.Event) {
		m.event(e)
		out.event(e)
	}
	if opts.metrics != "" {
		srv, bound, err := listenMetrics(opts.metrics, reg, false)
		if err != nil {
			return fmt.Errorf("--metrics: %w", err)
		}
		if opts.metricsReady != nil {
			opts.metricsReady(bound.String())
		}
		defer srv.Close()
	}
	a, err := disks.New(cfg)
	if err != nil {
		out.stop()
		if errors.Is(err, disks.ErrOutOfRange) {
			return usageError{disksErr(err)} // a value out of range: exit 2
		}
		return disksErr(err)
	}
	defer a.Close()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go reloadDisksOnHUP(ctx, g, hup, budget, opts.rateFile)
	err = a.Run(ctx, opts.interval, func(res disks.PassResult) {
		m.pass(res)
		out.summary(res)
	})
	out.stop()
	if err != nil {
		return disksErr(err)
	}
	return out.err
}

// reloadDisksOnHUP re-reads --bwlimit-file on each SIGHUP until ctx ends.
func reloadDisksOnHUP(ctx context.Context, g *globalOpts, hup <-chan os.Signal, b qos.Budget, rateFile string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		switch what, err := reloadRate(b, rateFile); {
		case rateFile == "":
			g.stderrLine("sparsesync: disks: SIGHUP: no --bwlimit-file to re-read")
		case err != nil:
			g.stderrLine(fmt.Sprintf("sparsesync: disks: SIGHUP: %v", err))
		default:
			g.stderrLine("sparsesync: disks: SIGHUP: reloaded " + what)
		}
	}
}

// disksErr prefixes err with the command's name. A sentinel of the
// library inside it keeps its own "disks: " (only sentinels carry the
// package name): errorLine leaves the sentinel's out.
func disksErr(err error) error {
	return fmt.Errorf("disks: %w", err)
}

// disksPrinter prints events: JSON lines, or one human line each, and a
// progress bar on stderr during each move.
type disksPrinter struct {
	g    *globalOpts
	json bool
	bars bool
	// running are the progress samplers of the moves under way.
	running map[string]func() (int64, int64)
	bar     *progressBar
	err     error
}

func (p *disksPrinter) stop() {
	p.bar.Stop()
	p.bar = nil
}

// track keeps the progress samplers of the moves running (several with
// --max-concurrent-moves) and shows one bar for them: the move's name, or
// "N moves" summing their bytes.
func (p *disksPrinter) track(e disks.Event) {
	switch e.Kind {
	case disks.EventMoveStart:
		if e.Progress == nil {
			return
		}
		if p.running == nil {
			p.running = map[string]func() (int64, int64){}
		}
		p.running[e.Replica] = e.Progress
	case disks.EventMoveDone, disks.EventMoveFailed:
		delete(p.running, e.Replica)
	}
	if !p.bars || len(p.running) == 0 {
		return
	}
	label := fmt.Sprintf("%d moves", len(p.running))
	samplers := make([]func() (int64, int64), 0, len(p.running))
	for name, f := range p.running {
		if len(p.running) == 1 {
			label = name
		}
		samplers = append(samplers, f)
	}
	p.bar = startProgress(p.g.stderr, label, terminalWidth(p.g.stderr, 80), 0, func() (int64, int64, int64) {
		var done, total int64
		for _, f := range samplers {
			d, t := f()
			done, total = done+d, total+t
		}
		return done, total, 0
	})
}

func (p *disksPrinter) event(e disks.Event) {
	p.stop()
	var err error
	if p.json {
		// disks.Event is the JSON line (its time in UTC, RFC 3339).
		e.Time = e.Time.UTC()
		err = writeJSONLine(p.g.stdout, e)
	} else {
		switch e.Kind {
		case disks.EventPressure:
			_, err = fmt.Fprintf(p.g.stdout, "pressure     %s: %s\n", e.From, e.Reason)
		case disks.EventMoveStart:
			_, err = fmt.Fprintf(p.g.stdout, "move         %s (volume %s) %s -> %s, %s\n", e.Replica, e.Volume, e.From, e.To, bytesize.Format(e.Bytes))
		case disks.EventMoveDone:
			_, err = fmt.Fprintf(p.g.stdout, "moved        %s %s -> %s, %s in %.2f s%s\n", e.Replica, e.From, e.To, bytesize.Format(e.Bytes), e.Seconds, suffix(e.Reason))
		case disks.EventMoveFailed:
			_, err = fmt.Fprintf(p.g.stdout, "failed       %s %s -> %s: %s\n", e.Replica, e.From, e.To, e.Reason)
		case disks.EventSkip:
			_, err = fmt.Fprintf(p.g.stdout, "skip         %s %s -> %s: %s\n", e.Replica, e.From, e.To, e.Reason)
		case disks.EventHeld:
			what := ""
			if e.Replica != "" {
				what = fmt.Sprintf(" keeps %s (volume %s)", e.Replica, e.Volume)
			}
			_, err = fmt.Fprintf(p.g.stdout, "held         %s%s: %s\n", e.From, what, e.Reason)
		case disks.EventIgnored:
			_, err = fmt.Fprintf(p.g.stdout, "ignored      %s %s: %s\n", e.From, e.Replica, e.Reason)
		}
	}
	if err != nil && p.err == nil {
		p.err = err
	}
	p.track(e)
}

func suffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

func (p *disksPrinter) summary(res disks.PassResult) {
	if p.json {
		return
	}
	var pressured []string
	for _, d := range res.Disks {
		if d.Pressured {
			pressured = append(pressured, d.Name)
		}
	}
	under := "none"
	if len(pressured) > 0 {
		under = strings.Join(pressured, ", ")
	}
	pending := ""
	if n := len(res.CleanupPending); n > 0 {
		pending = fmt.Sprintf(" (%d with cleanup left to the next start)", n)
	}
	_, err := fmt.Fprintf(p.g.stdout, "pass: %d planned, %d moved (%s)%s, %d failed, %d skipped, %d held; under pressure when measured: %s\n",
		len(res.Planned), len(res.Moved), bytesize.Format(res.BytesMoved), pending, len(res.Failed), len(res.Skipped), res.Held, under)
	if err != nil && p.err == nil {
		p.err = err
	}
}

// disksMetrics are the agent's Prometheus metrics, on a registry of the
// command's own (no global state).
type disksMetrics struct {
	passes     prometheus.Counter
	moves      *prometheus.CounterVec
	movedBytes prometheus.Counter
	moveSecs   prometheus.Histogram
	disk       map[string]*prometheus.GaugeVec
	throttled  prometheus.Counter
}

// newDisksMetrics makes the agent's metrics; rate is its budget's limit.
func newDisksMetrics(reg *prometheus.Registry, rate func() int64) *disksMetrics {
	m := &disksMetrics{
		passes: prometheus.NewCounter(prometheus.CounterOpts{Name: "sparsesync_disks_passes_total", Help: "Passes run."}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sparsesync_disks_moves_total",
			Help: "Moves by outcome: done (the replica lives on its target, even if its cleanup was left to the next start), failed (rolled back), skipped."}, []string{"result"}),
		movedBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "sparsesync_disks_moved_bytes_total",
			Help: "Allocated bytes of the replicas moved."}),
		moveSecs: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sparsesync_disks_move_seconds",
			Help: "Duration of completed moves.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}),
		disk: map[string]*prometheus.GaugeVec{},
	}
	for _, g := range []struct{ name, help string }{
		{"max_bytes", "Size of the disk's filesystem (statfs)."},
		{"available_bytes", "Bytes available on the disk (statfs)."},
		{"reserved_bytes", "Bytes reserved on the disk (configuration)."},
		{"scheduled_bytes", "Sum of the sizes of the disk's replicas."},
		{"replicas", "Replica directories on the disk."},
		{"pressured", "1 when the disk is under pressure, else 0."},
	} {
		m.disk[g.name] = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sparsesync_disks_disk_" + g.name, Help: g.help}, []string{"disk"})
		reg.MustRegister(m.disk[g.name])
	}
	reg.MustRegister(m.passes, m.moves, m.movedBytes, m.moveSecs)
	m.throttled = newQoSMetrics(reg, rate)
	for _, r := range []string{"done", "failed", "skipped"} {
		m.moves.WithLabelValues(r)
	}
	return m
}

func (m *disksMetrics) event(e disks.Event) {
	switch e.Kind {
	case disks.EventMoveDone:
		// The count last, as in serveMetrics.record: a scrape that sees
		// the move counted sees its bytes and duration too.
		m.movedBytes.Add(float64(e.Bytes))
		m.moveSecs.Observe(e.Seconds)
		m.throttled.Add(e.ThrottledSeconds)
		m.moves.WithLabelValues("done").Inc()
	case disks.EventMoveFailed:
		m.moves.WithLabelValues("failed").Inc()
	case disks.EventSkip:
		if e.To != "" {
			m.moves.WithLabelValues("skipped").Inc()
		}
	}
}

func (m *disksMetrics) pass(res disks.PassResult) {
	if res.Disks == nil {
		return
	}
	m.passes.Inc()
	for _, d := range res.Disks {
		p := 0.0
		if d.Pressured {
			p = 1
		}
		for k, v := range map[string]float64{"max_bytes": float64(d.MaxBytes), "available_bytes": float64(d.AvailableBytes),
			"reserved_bytes": float64(d.ReservedBytes), "scheduled_bytes": float64(d.ScheduledBytes),
			"replicas": float64(d.Replicas), "pressured": p} {
			m.disk[k].WithLabelValues(d.Name).Set(v)
		}
	}
}
