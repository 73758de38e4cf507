package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/internal/bytesize"
	"github.com/sparsesync/sparsesync/replica"
)

// replicaSubcommands lists the constructors of `sparsesync replica ...`;
// add one line per new subcommand.
var replicaSubcommands = []func(*globalOpts) *cobra.Command{
	newReplicaCreateCommand,
	newReplicaInfoCommand,
	newReplicaCheckCommand,
	newReplicaBenchCommand,
	newReplicaExportCommand,
	newReplicaRebuildCommand,
}

func newReplicaCommand(g *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "replica",
		Short: "Create, inspect, check, benchmark, export and rebuild Longhorn-format replica directories",
		Long: `Work on replica directories in Longhorn's format (volume.meta, volume-head-NNN.img,
volume-snap-*.img, revision.counter), ours or written by Longhorn itself:
create, info, check, bench, export (one sparse image of the volume) and
rebuild (copy a replica: local first, TCP fallback).
` + exitCodesHelp,
	}
	for _, newCmd := range replicaSubcommands {
		cmd.AddCommand(newCmd(g))
	}
	return cmd
}

// parseReplicaSize parses a volume or filesystem size (bytesize.Parse),
// which must be positive.
func parseReplicaSize(s string) (int64, error) {
	n, err := bytesize.Parse(s)
	if err == nil && n == 0 {
		err = fmt.Errorf("invalid size %q: must be positive", s)
	}
	return n, err
}

type replicaCreateOptions struct {
	size    string
	counter string
}

func newReplicaCreateCommand(g *globalOpts) *cobra.Command {
	opts := replicaCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create --size SIZE [--revision-counter on|off|per-write] DIR...",
		Short: "Create empty replica directories",
		Long: `Create a replica directory of SIZE bytes (a multiple of 4096; suffixes K, M, G, T)
in Longhorn's layout. --revision-counter takes the words of replica bench
and check: on (the default), off, or per-write (Longhorn's own way, an
extra counter write per I/O); the mode is recorded in replica.hdr. Several DIRs are created as the replicas of one
volume (one volume id); if one cannot be created none is left behind.
` + exitCodesHelp,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplicaCreate(cmd.Context(), g, opts, args...)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.size, "size", "", "volume size in bytes (suffix K, M, G, T)")
	f.StringVar(&opts.counter, "revision-counter", "on", "revision counter mode: on, off or per-write")
	_ = cmd.MarkFlagRequired("size")
	return cmd
}

// parseCounterFlag parses --revision-counter of create and bench: on,
// off, per-write; true and false (the old boolean spelling) mean on and off.
func parseCounterFlag(s string) (replica.CounterMode, error) {
	switch s {
	case "true":
		return replica.CounterOn, nil
	case "false":
		return replica.CounterOff, nil
	}
	m, err := replica.ParseCounterMode(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not on, off or per-write", s)
	}
	return m, nil
}

func runReplicaCreate(ctx context.Context, g *globalOpts, opts replicaCreateOptions, dirs ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	size, err := parseReplicaSize(opts.size)
	if err != nil {
		return usageError{fmt.Errorf("replica create: --size: %w", err)}
	}
	if size%replica.BlockSize != 0 {
		return usageError{fmt.Errorf("replica create: --size %d is not a multiple of %d", size, replica.BlockSize)}
	}
	mode, err := parseCounterFlag(opts.counter)
	if err != nil {
		return usageError{fmt.Errorf("replica create: --revision-counter: %w", err)}
	}
	v, err := replica.CreateVolume(dirs, size, &replica.VolumeOptions{Counter: mode})
	if err != nil {
		return fmt.Errorf("replica create: %w", err)
	}
	if err := v.Close(); err != nil {
		return fmt.Errorf("replica create: %w", err)
	}
	for _, d := range dirs {
		fmt.Fprintf(g.stdout, "created %s: %d bytes, revision counter %s\n", d, size, mode)
	}
	return nil
}

type replicaInfoOptions struct{ json bool }

func newReplicaInfoCommand(g *globalOpts) *cobra.Command {
	opts := replicaInfoOptions{}
	cmd := &cobra.Command{
		Use:   "info [--json] DIR",
		Short: "Describe a replica directory (read-only)",
		Long: `Describe a replica directory without modifying it: size, head, counter mode and
revision, head mtime and allocated bytes, the snapshot chain (head first).
Works on directories Longhorn wrote. --json prints one object
{"dir", "size", "head", "revision_counter_enabled", "revision", "head_mtime_ns",
"head_allocated_bytes", "chain", "epoch", "has_header"} plus "ignored_header"
(why a replica.hdr left by an earlier replica in the directory was ignored)
and "foreign_writes" (writes another writer, Longhorn, counted in
revision.counter on top of our unclean count) when they apply; revision is
null when the counter is off.
` + exitCodesHelp,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplicaInfo(cmd.Context(), g, opts, args[0])
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object")
	return cmd
}

func runReplicaInfo(ctx context.Context, g *globalOpts, opts replicaInfoOptions, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	info, err := replica.Inspect(dir, nil)
	if err != nil {
		return fmt.Errorf("replica info: %w", err)
	}
	if opts.json {
		return writeJSONLine(g.stdout, info)
	}
	rev := "off"
	if info.Revision != nil {
		rev = strconv.FormatInt(*info.Revision, 10)
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "dir\t%s\n", info.Dir)
	fmt.Fprintf(tw, "size\t%d\n", info.Size)
	fmt.Fprintf(tw, "head\t%s\n", info.Head)
	fmt.Fprintf(tw, "revision\t%s\n", rev)
	fmt.Fprintf(tw, "head mtime\t%s\n", time.Unix(0, info.HeadModTimeNs).UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(tw, "head allocated\t%d\n", info.HeadAllocatedBytes)
	fmt.Fprintf(tw, "chain\t%s\n", strings.Join(info.Chain, " <- "))
	switch {
	case info.HasHeader:
		fmt.Fprintf(tw, "epoch\t%d\n", info.Epoch)
	case info.IgnoredHeader != "":
		fmt.Fprintf(tw, "epoch\tnone (replica.hdr ignored: written by Longhorn)\n")
	default:
		fmt.Fprintf(tw, "epoch\tnone (no replica.hdr: written by Longhorn)\n")
	}
	if info.IgnoredHeader != "" {
		fmt.Fprintf(tw, "replica.hdr\tignored, a leftover: %s\n", info.IgnoredHeader)
	}
	if info.ForeignWrites > 0 {
		fmt.Fprintf(tw, "foreign writes\tat least %d by another writer on top of revision %s (our writer did not close): the start check cannot order this replica against a sibling at or above it\n", info.ForeignWrites, rev)
	}
	return tw.Flush()
}

type replicaCheckOptions struct {
	salvage bool
	json    bool
	counter string
}

func newReplicaCheckCommand(g *globalOpts) *cobra.Command {
	opts := replicaCheckOptions{}
	cmd := &cobra.Command{
		Use:   "check [--salvage] [--json] DIR...",
		Short: "Decide which replicas of a volume are RW after a crash (read-only)",
		Long: `Run the engine's start check over the replica directories of one volume and
print each replica's mode (RW or ERR) and the reason:

  counter on:  a replica whose recorded mode differs, whose counter is
               unreadable, or whose count is below the highest is ERR
  counter off: with --salvage exactly one replica stays RW: head mtime
               strictly within 5 s of the newest, then most allocated
               bytes, then the later mtime, then the lowest path
  always:      a replica that cannot be read, whose size differs from most
               replicas', that belongs to another volume or has a lower
               epoch (demoted by the engine) is ERR

A replica.hdr left in a directory by an earlier replica (Longhorn's Delete
keeps it) is ignored: Longhorn's files alone count. When our writer did not
close a replica and Longhorn wrote into it since (revision.counter moved
past the count we last wrote), its order against a sibling at or above our
count cannot be decided: both are ERR, the reason names the replica holding
the other writer's writes, and the exit status is 1.

--revision-counter=auto takes the mode most replicas recorded. --json prints
{"replicas": [{"dir", "mode", "reason"}], "rw": [dirs]}.
Exit status 1 when no replica is RW.
` + exitCodesHelp,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplicaCheck(cmd.Context(), g, opts, args...)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.salvage, "salvage", false, "with the counter off, keep exactly one replica")
	f.BoolVar(&opts.json, "json", false, "print one JSON object")
	f.StringVar(&opts.counter, "revision-counter", "auto", "the volume's counter setting: auto, on (per-write: the same) or off")
	return cmd
}

func runReplicaCheck(ctx context.Context, g *globalOpts, opts replicaCheckOptions, dirs ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	co := replica.CheckOptions{Salvage: opts.salvage}
	switch opts.counter {
	case "auto":
	case "on", "per-write", "off":
		// The words of create and bench: per-write is a way of keeping
		// the counter on (Longhorn's), so the volume's setting is on.
		on := opts.counter != "off"
		co.Counter = &on
	default:
		return usageError{fmt.Errorf("replica check: --revision-counter: %q is not auto, on, per-write or off", opts.counter)}
	}
	rep, checkErr := replica.Check(dirs, &co)
	if rep.Replicas == nil && checkErr != nil {
		return fmt.Errorf("replica check: %w", checkErr)
	}
	if opts.json {
		if rep.RW == nil {
			rep.RW = []string{}
		}
		if err := writeJSONLine(g.stdout, rep); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
		for _, r := range rep.Replicas {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Mode, r.Dir, r.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if checkErr != nil {
		return fmt.Errorf("replica check: %w", checkErr)
	}
	return nil
}

type replicaBenchOptions struct {
	qd       int
	seconds  float64
	counter  string
	size     string
	json     bool
	keep     bool
	flush    bool
	progress string
}

func newReplicaBenchCommand(g *globalOpts) *cobra.Command {
	opts := replicaBenchOptions{}
	cmd := &cobra.Command{
		Use:   "bench [--qd N] [--seconds S] [--revision-counter on|off|per-write] [--flush] DIR",
		Short: "Measure random 4 KiB write IOPS of a replica",
		Long: `Create a replica in DIR (which must not hold one), fill it, and measure random
4 KiB-aligned 4 KiB overwrites with N writes in flight for S seconds.
--revision-counter per-write imitates Longhorn's extra O_DIRECT counter write
per I/O, for comparison with on (shared-page counter) and off. --flush makes
every write durable (a Flush after each one; concurrent flushes share one
sync), as an engine serving FUA or flush-heavy guests would. DIR is removed
afterwards unless --keep.
` + exitCodesHelp,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplicaBench(cmd.Context(), g, opts, args[0])
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.qd, "qd", 1, "writes in flight")
	f.Float64Var(&opts.seconds, "seconds", 5, "measurement time")
	f.StringVar(&opts.counter, "revision-counter", "on", "counter mode: on, off or per-write")
	f.StringVar(&opts.size, "size", "1G", "volume size (filled before measuring)")
	f.BoolVar(&opts.json, "json", false, "print one JSON object")
	f.BoolVar(&opts.keep, "keep", false, "keep the replica directory")
	f.BoolVar(&opts.flush, "flush", false, "flush after every write (durable writes)")
	f.StringVar(&opts.progress, "progress", "auto", "progress bar of the fill on stderr: auto (on a terminal), always or never")
	return cmd
}

func runReplicaBench(ctx context.Context, g *globalOpts, opts replicaBenchOptions, dir string) error {
	mode, err := parseCounterFlag(opts.counter)
	if err != nil {
		return usageError{fmt.Errorf("replica bench: --revision-counter: %w", err)}
	}
	size, err := parseReplicaSize(opts.size)
	if err != nil {
		return usageError{fmt.Errorf("replica bench: --size: %w", err)}
	}
	if opts.qd < 1 || opts.qd > 1024 {
		return usageError{fmt.Errorf("replica bench: --qd %d out of 1..1024", opts.qd)}
	}
	if opts.seconds <= 0 || opts.seconds > 3600 {
		return usageError{fmt.Errorf("replica bench: --seconds %g out of (0, 3600]", opts.seconds)}
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("replica bench: %s: directory is not empty", dir)
	}
	// The fill writes every block of DIR's head: watch it allocate.
	// The bar is cleared when the fill is done, before measuring.
	bar, err := g.startBar(opts.progress, "bench fill", g.delay(time.Second), func() sampleFunc {
		return fileSampler(size, func() int64 {
			return dirAllocated(dir, func(n string) bool { return strings.HasPrefix(n, "volume-head-") && strings.HasSuffix(n, ".img") })
		})
	}, clearAtTotal)
	if err != nil {
		return err
	}
	res, err := bench.WriteBench(ctx, dir, &bench.WriteBenchOptions{
		Size: size, QueueDepth: opts.qd, Duration: time.Duration(opts.seconds * float64(time.Second)), Counter: mode, Flush: opts.flush,
	})
	bar.Stop()
	if !opts.keep {
		if rerr := os.RemoveAll(dir); err == nil && rerr != nil {
			err = rerr
		}
	}
	if err != nil {
		return fmt.Errorf("replica bench: %w", err)
	}
	if opts.json {
		return writeJSONLine(g.stdout, map[string]any{
			"qd": opts.qd, "revision_counter": mode.String(), "flush": opts.flush, "writes": res.Writes,
			"seconds": res.Elapsed.Seconds(), "iops": res.IOPS, "revision": res.Revision,
		})
	}
	what := "writes"
	if opts.flush {
		what = "writes, each flushed"
	}
	fmt.Fprintf(g.stdout, "random 4 KiB %s, qd %d, revision counter %s: %.0f IOPS (%d writes in %.2fs)\n",
		what, opts.qd, mode, res.IOPS, res.Writes, res.Elapsed.Seconds())
	return nil
}
