package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/localsync"
)

// benchOpts are the flags of "sparsesync bench".
type benchOpts struct {
	workloads, scenarios, peers, dirs []string
	runs                              int
	json                              bool
	html                              string
	profile                           bool
	dropAll                           bool
	floorHoles                        bool
	steady                            bool
	profileDir                        string
	scale                             float64
	seed                              uint64
	tree                              string
	fsSize                            string
	fsKinds                           []string
	from                              []string
	markdown                          bool
	progress                          string
	jsonl                             string
	bwlimitRates                      []string
}

func newBenchCommand(g *globalOpts) *cobra.Command {
	opts := &benchOpts{}
	var workloadHelp, peerHelp, changeHelp []string
	for _, w := range bench.Workloads() {
		workloadHelp = append(workloadHelp, fmt.Sprintf("  %-18s %s", w.Name, w.Description))
	}
	for _, c := range bench.Changes() {
		changeHelp = append(changeHelp, fmt.Sprintf("  %-18s %s", c.Name, c.Description))
	}
	for _, p := range bench.Peers() {
		peerHelp = append(peerHelp, fmt.Sprintf("  %-18s %s", p.Name, p.Description))
	}
	cmd := &cobra.Command{
		Use:   "bench [--workload W ...] [--scenario S ...] [--peer P ...] [--dir PATH ...] [--runs N] [--json] [--html report.html] [--profile]",
		Short: "Measure sparsesync against cp, rsync, qemu-img, bmaptool and ssync, next to the disk's floor",
		Long: "bench generates seeded workloads, copies or re-syncs them with sparsesync and with every\n" +
			"peer (skipped, with the reason, when not installed), all tools interleaved in each round,\n" +
			"the workload's files evicted from the page cache before each run (--drop-all-caches: the whole\n" +
			"cache, as root), every target made durable, and measures the physical\n" +
			"floor (the data read at a deep queue, the same bytes written and made durable, with O_DIRECT, through\n" +
			"the page cache, and reading with O_DIRECT and writing through the cache, the fastest kept) in the same rounds.\n" +
			"It prints a table (or --json, one document), and --html writes a self-contained report.\n\n" +
			"--steady starts sparsesync's local re-syncs from the target its own re-sync of the version before\n" +
			"left (its mark and DST.sparsesync manifest kept: what a nightly re-sync finds), made untimed before\n" +
			"each run; without it every tool re-syncs a plain copy of the old version. Peers keep no state.\n\n" +
			"Without --dir it makes its own ext4, XFS and btrfs loop filesystems in direct I/O mode as\n" +
			"root, or uses a temporary directory; with --dir it runs on your disks (e.g. an NVMe mount).\n\n" +
			"Workloads:\n" + strings.Join(workloadHelp, "\n") + "\n\nScenarios: copy (to a new file) and the change scripts (re-sync of the old version):\n" +
			strings.Join(changeHelp, "\n") + "\n\n" +
			"--scenario bwlimit, alone, measures --bwlimit instead of racing peers: at each of --bwlimit-rates, a\n" +
			"copy, a re-sync after 1% of the blocks changed and a push, each sized to last about 6 s, with the bytes\n" +
			"the kernel accounts to the sparsesync process (/proc/PID/io: written to storage, read from it, sent\n" +
			"to the socket) for each whole second over the limit: the median and the busiest second.\n\n" +
			multiSourceBenchHelp +
			"Peers:\n" + strings.Join(peerHelp, "\n") + "\n\n" +
			"Examples:\n" +
			"  sparsesync bench --workload sparse-10pct --runs 5 --html report.html\n" +
			"  sparsesync bench --dir /mnt/nvme --json > nvme.json\n" +
			exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), g, opts)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&opts.workloads, "workload", nil, "workload to run (repeat; default all)")
	f.StringSliceVar(&opts.scenarios, "scenario", nil, "copy or a change script (repeat; default copy and resync-1pct)")
	f.StringSliceVar(&opts.peers, "peer", nil, "peer to compare with (repeat; default all; \"none\" for none)")
	f.StringSliceVar(&opts.dirs, "dir", nil, "directory to run in (repeat; default: fresh loop filesystems as root)")
	f.IntVar(&opts.runs, "runs", 3, "rounds per case")
	f.BoolVar(&opts.json, "json", false, "print one JSON document instead of the table")
	f.StringSliceVar(&opts.from, "from", nil, "read JSON reports written by --json instead of running, their cases merged (to re-render them)")
	f.BoolVar(&opts.markdown, "markdown", false, "print a Markdown table of sparsesync against the floor and every peer")
	f.StringVar(&opts.html, "html", "", "write a self-contained HTML report to this file")
	f.BoolVar(&opts.profile, "profile", false, "record a CPU profile of each sparsesync run and summarise it")
	f.StringVar(&opts.profileDir, "profile-dir", "", "keep the CPU profiles in this directory")
	f.Float64Var(&opts.scale, "scale", 1, "multiply every workload's size (e.g. 0.01 for a quick look)")
	f.Uint64Var(&opts.seed, "seed", 1, "seed of the workloads' layouts and changes")
	f.StringVar(&opts.tree, "tree", "/usr/share", "directory tree copied into the vm-image workload")
	f.StringSliceVar(&opts.fsKinds, "fs", []string{"ext4", "xfs", "btrfs"}, "loop filesystems to make without --dir (ext4, xfs, btrfs)")
	f.StringVar(&opts.fsSize, "fs-size", "24G", "size of each loop filesystem made without --dir (sparse image)")
	f.StringVar(&opts.progress, "progress", "auto", "progress on stderr: auto (a live line on a terminal, a line per finished case otherwise), always or never")
	f.StringVar(&opts.jsonl, "jsonl", "", "append each case to this file as one JSON object a line as soon as it finishes")
	f.BoolVar(&opts.steady, "steady", false, "re-sync, as sparsesync, the target its own re-sync of the version before left (mark and manifest kept)")
	f.BoolVar(&opts.dropAll, "drop-all-caches", false, "drop the whole page cache before each run (root) instead of evicting only the workload's files")
	f.BoolVar(&opts.floorHoles, "floor-holes", false, "also race, in every copy case, the floor with the data written at the source's offsets (holes kept), as the tool floor-holes")
	f.StringSliceVar(&opts.bwlimitRates, "bwlimit-rates", []string{"10M", "50M", "200M"}, "with --scenario bwlimit: the --bwlimit rates to measure")
	cmd.AddCommand(newBenchExecCommand(g))
	return cmd
}

func runBench(ctx context.Context, g *globalOpts, opts *benchOpts) error {
	if opts.runs < 1 || opts.runs > 1000 {
		return usageError{fmt.Errorf("bench: --runs %d out of 1..1000", opts.runs)}
	}
	if opts.scale <= 0 || opts.scale > 16 {
		return usageError{fmt.Errorf("bench: --scale %g out of (0, 16]", opts.scale)}
	}
	if len(opts.from) > 0 {
		rep, err := readBenchReports(opts.from)
		if err != nil {
			return err
		}
		return writeBenchOutputs(g, opts, rep)
	}
	showProgress, err := progressEnabled(opts.progress, g.stderr)
	if err != nil {
		return err
	}
	caseLines := opts.progress != "never" // a line per finished case (on a terminal, under the live line)
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: finding this program to run it: %w", err)
	}
	if slices.Contains(opts.scenarios, bench.ScenarioMultiSource) {
		return runBenchMultiSource(ctx, g, opts, exe)
	}
	peers := opts.peers
	if len(peers) == 1 && peers[0] == "none" {
		peers = []string{}
	}
	cfg := bench.Config{
		Workloads: opts.workloads, Scenarios: opts.scenarios, Peers: peers, Runs: opts.runs,
		Gen:        bench.GenOptions{Scale: opts.scale, Seed: opts.seed, TreeDir: opts.tree},
		Sparsesync: benchSparsesyncCommand(exe),
		SparsesyncServe: func(root, addr string) []string {
			return []string{exe, "serve", "--root", root, "--listen", addr, "--no-auth"}
		},
		SparsesyncPush: func(src, addr, remote string) []string {
			return []string{exe, "push", "--no-auth", "--retries", "0", "--progress", "never", src, addr, remote}
		},
		Profile: opts.profile || opts.profileDir != "", ProfileDir: opts.profileDir,
		DropAll: opts.dropAll, Steady: opts.steady, FloorHoles: opts.floorHoles,
	}
	if opts.profileDir != "" {
		if err := os.MkdirAll(opts.profileDir, 0o755); err != nil {
			return fmt.Errorf("bench: --profile-dir: %w", err)
		}
	}
	bwlimit := slices.Contains(opts.scenarios, bench.ScenarioBwlimit)
	if bwlimit && len(opts.scenarios) > 1 {
		return usageError{fmt.Errorf("bench: --scenario bwlimit runs alone")}
	}
	if !bwlimit {
		if err := preflightBench(ctx, &cfg); err != nil {
			return err
		}
	}
	for _, d := range opts.dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return err
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return usageError{fmt.Errorf("bench: --dir %s: not a directory", d)}
		}
		cfg.Places = append(cfg.Places, bench.Place{Name: d, Dir: abs})
	}
	if len(cfg.Places) == 0 {
		places, cleanup, err := benchDefaultPlaces(ctx, g, opts.fsKinds, opts.fsSize)
		defer cleanup()
		if err != nil {
			return err
		}
		cfg.Places = places
	}
	if bwlimit {
		return runBenchBwlimit(ctx, g, opts, exe, cfg.Places)
	}
	plan := newBenchPlan(&cfg)
	if caseLines {
		fmt.Fprintln(g.stderr, plan.intro(&cfg, probeWriteRate))
	}
	var log *caseLog
	if opts.jsonl != "" {
		if log, err = openCaseLog(opts.jsonl); err != nil {
			return err
		}
	}
	if showProgress {
		cfg.Progress = func(p bench.Progress) {
			fmt.Fprintf(g.stderr, "\r\033[K[%d/%d] %s %s on %s: %s, round %d/%d", p.Case, p.Cases, p.Workload, p.Scenario, p.Place, p.Tool, p.Round, p.Runs)
		}
	}
	cfg.CaseDone = func(c bench.Case, done, _ int) {
		log.write(c)
		if caseLines {
			if showProgress {
				fmt.Fprint(g.stderr, "\r\033[K")
			}
			fmt.Fprintln(g.stderr, plan.caseDone(c, done))
		}
	}
	rep, err := bench.Run(ctx, cfg)
	if showProgress {
		fmt.Fprint(g.stderr, "\r\033[K")
	}
	if lerr := log.close(); err == nil && lerr != nil {
		return lerr
	}
	if err != nil {
		return benchPartial(g.stdout, opts, rep, plan.cases, err)
	}
	return writeBenchOutputs(g, opts, rep)
}

// writeBenchOutputs writes the HTML report (--html) and prints the JSON
// document, the Markdown table or the terminal table.
func writeBenchOutputs(g *globalOpts, opts *benchOpts, rep *bench.Report) error {
	if opts.html != "" {
		if err := writeBenchHTML(rep, opts.html); err != nil {
			return err
		}
	}
	switch {
	case opts.json:
		return rep.WriteJSON(g.stdout)
	case opts.markdown:
		return rep.WriteMarkdown(g.stdout)
	}
	return rep.WriteTable(g.stdout)
}

// preflightBench fills in cfg's defaults and refuses, before any
// filesystem is made or workload generated, an unknown workload, scenario
// or peer (usage errors) and a --tree too big for its image.
func preflightBench(ctx context.Context, cfg *bench.Config) error {
	places := cfg.Places
	if len(places) == 0 {
		cfg.Places = []bench.Place{{Name: "preflight", Dir: os.TempDir()}} // the places come later
	}
	err := cfg.Preflight(ctx)
	cfg.Places = places
	if err == nil {
		return nil
	}
	for _, e := range []error{bench.ErrUnknownWorkload, bench.ErrUnknownChange, bench.ErrUnknownPeer, bench.ErrTreeTooBig} {
		if errors.Is(err, e) {
			return usageError{err}
		}
	}
	return fmt.Errorf("bench: %w", err)
}

// benchDefaultPlaces makes ext4, XFS and btrfs loop filesystems as root
// (those whose mkfs is installed), else returns a temporary directory.
func benchDefaultPlaces(ctx context.Context, g *globalOpts, kinds []string, fsSize string) ([]bench.Place, func(), error) {
	var fss []*bench.LoopFS
	cleanup := func() {
		for _, l := range fss {
			if err := l.Close(); err != nil {
				fmt.Fprintf(g.stderr, "sparsesync: bench: %v\n", err)
			}
		}
	}
	if os.Geteuid() != 0 {
		dir := os.TempDir()
		fmt.Fprintf(g.stderr, "sparsesync: bench: not root: running in %s (no loop filesystems)\n", dir)
		return []bench.Place{{Name: "tmpdir", Dir: dir}}, cleanup, nil
	}
	size, err := parseReplicaSize(fsSize)
	if err != nil {
		return nil, cleanup, usageError{fmt.Errorf("bench: --fs-size: %w", err)}
	}
	var places []bench.Place
	for _, kind := range kinds {
		l, err := bench.MountLoop(ctx, kind, size, "")
		if err != nil {
			fmt.Fprintf(g.stderr, "sparsesync: bench: skipping %s: %v\n", kind, err)
			continue
		}
		fss = append(fss, l)
		if !l.DirectIO {
			fmt.Fprintf(g.stderr, "sparsesync: bench: %s: the loop device stays buffered (no direct I/O)\n", kind)
		}
		places = append(places, bench.Place{Name: kind, Dir: l.Dir})
	}
	if len(places) == 0 {
		return nil, cleanup, fmt.Errorf("bench: could not make any loop filesystem; use --dir")
	}
	return places, cleanup, nil
}

// benchSparsesyncCommand runs this program's hidden "bench exec" for each
// sparsesync run: a child process, measured like every peer.
func benchSparsesyncCommand(exe string) func(src, dst, profile string) []string {
	return func(src, dst, profile string) []string {
		argv := []string{exe, "bench", "exec"}
		if profile != "" {
			argv = append(argv, "--cpuprofile", profile)
		}
		return append(argv, src, dst)
	}
}

func writeBenchHTML(rep *bench.Report, path string) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: --html: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("bench: --html: %w", cerr)
		}
	}()
	if err := rep.WriteHTML(f); err != nil {
		return fmt.Errorf("bench: --html %s: %w", path, err)
	}
	return nil
}

// newBenchExecCommand is the sparsesync side of each benchmark run: what
// "sparsesync local SRC DST" does (a copy or re-sync, made durable), with
// an optional CPU profile. Hidden: bench runs it.
func newBenchExecCommand(g *globalOpts) *cobra.Command {
	var profile string
	cmd := &cobra.Command{
		Use:    "exec [--cpuprofile FILE] SRC DST",
		Short:  "Copy or re-sync SRC to DST as sparsesync local does, for bench (internal)",
		Hidden: true,
		Args:   exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchExec(cmd.Context(), g.stdout, profile, args[0], args[1])
		},
	}
	cmd.Flags().StringVar(&profile, "cpuprofile", "", "write a CPU profile to FILE")
	return cmd
}

func runBenchExec(ctx context.Context, _ io.Writer, profile, src, dst string) (err error) {
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return fmt.Errorf("bench exec: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("bench exec: %s: %w", profile, err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if cerr := f.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("bench exec: %s: %w", profile, cerr)
			}
		}()
	}
	// local's defaults: nothing but the manifest differs from the library's.
	if _, err := localsync.Copy(ctx, src, dst, &localsync.Options{Manifest: localManifestDefault}); err != nil {
		return fmt.Errorf("bench exec: %w", err)
	}
	return nil
}

// readBenchReports reads JSON reports and merges them: the first one's
// host and runs, every report's cases in order, the earliest start and
// the latest finish.
func readBenchReports(paths []string) (*bench.Report, error) {
	var all *bench.Report
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("bench: --from: %w", err)
		}
		rep, err := bench.ReadJSON(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("bench: --from %s: %w", p, err)
		}
		if all == nil {
			all = rep
			continue
		}
		all.Cases = append(all.Cases, rep.Cases...)
		if rep.Started.Before(all.Started) {
			all.Started = rep.Started
		}
		if rep.Finished.After(all.Finished) {
			all.Finished, all.Host.Load1End = rep.Finished, rep.Host.Load1End
		}
	}
	return all, nil
}
