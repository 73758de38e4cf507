package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparsesync/sparsesync/scheduler/longhorn"
)

// planOpts are the flags shared by the plan subcommands.
type planOpts struct {
	states        []string
	json          bool
	now           string
	volume        string
	untilStable   bool
	maxPasses     int
	migrateFromV0 bool
}

const planStateHelp = `The state is what these print (one file, or several --state flags):

  kubectl get -n longhorn-system settings.longhorn.io,nodes.longhorn.io,volumes.longhorn.io,replicas.longhorn.io -o json
  kubectl get nodes -o json      # optional: allocatable CPU, for "plan cpu"
`

func newPlanCommand(g *globalOpts) *cobra.Command {
	opts := &planOpts{}
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Plan Longhorn replica placement, rebalancing and CPU reservation from a cluster's state",
		Long: "plan reads a Longhorn cluster's state and prints what the replica scheduler would decide,\n" +
			"deterministically and with the reason for every refusal. It changes nothing.\n\n" + planStateHelp + exitCodesHelp,
	}
	cmd.PersistentFlags().StringArrayVar(&opts.states, "state", nil, "cluster state `FILE` (JSON from kubectl; repeatable, - for stdin)")
	cmd.PersistentFlags().BoolVar(&opts.json, "json", false, "print JSON")
	cmd.PersistentFlags().StringVar(&opts.now, "now", "", "evaluate replenishment waits at this RFC 3339 `TIME` (default: now)")

	place := &cobra.Command{
		Use:   "place",
		Short: "Choose a node and disk for every missing replica",
		Long: "place chooses a node and disk for every missing replica (of every volume, or of --volume),\n" +
			"following Longhorn's filters; volumes that cannot get all their replicas are listed with\n" +
			"the reasons counted per node or disk.\n\n" + planStateHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPlanPlace(cmd.Context(), g, opts)
		},
	}
	place.Flags().StringVar(&opts.volume, "volume", "", "plan only the volume `NAME`")

	rebalance := &cobra.Command{
		Use:   "rebalance",
		Short: "Plan auto-balance and disk-pressure moves",
		Long: "rebalance plans one pass of replica auto-balancing (zones, nodes) and disk-pressure moves;\n" +
			"with --until-stable it applies each pass in simulation and plans again until nothing moves.\n" +
			"A disk under pressure that keeps its replicas is listed (\"held\") with the reason, and when no\n" +
			"other disk of its node can take the replica, the refusals counted per disk.\n\n" + planStateHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPlanRebalance(cmd.Context(), g, opts)
		},
	}
	rebalance.Flags().BoolVar(&opts.untilStable, "until-stable", false, "repeat passes until nothing moves, printing every pass")
	rebalance.Flags().IntVar(&opts.maxPasses, "max-passes", 10000, "with --until-stable, stop with an error after `N` passes (every pass is printed)")

	cpu := &cobra.Command{
		Use:   "cpu",
		Short: "Validate CPU reservation settings and compute each node's manager CPU requests",
		Long: "cpu validates the guaranteed manager CPU settings and node overrides and prints each node's\n" +
			"engine and replica manager CPU requests. Exit status 1 when there are validation errors\n" +
			"(the plan is printed first). --migrate-from-deprecated prints the changes of the upgrade\n" +
			"step from the old guaranteed-engine-cpu setting instead.\n\n" + planStateHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPlanCPU(cmd.Context(), g, opts)
		},
	}
	cpu.Flags().BoolVar(&opts.migrateFromV0, "migrate-from-deprecated", false, "print the upgrade step from guaranteed-engine-cpu")

	cmd.AddCommand(place, rebalance, cpu)
	return cmd
}

// errCPUInvalid marks "plan cpu" found validation errors (exit status 1).
var errCPUInvalid = errors.New("plan cpu: invalid CPU reservation")

// loadPlanState reads every --state file into one cluster.
func loadPlanState(ctx context.Context, g *globalOpts, opts *planOpts) (*longhorn.Cluster, error) {
	if len(opts.states) == 0 {
		return nil, usageError{errors.New("plan: --state FILE is required")}
	}
	var l longhorn.Loader
	for _, name := range opts.states {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var data []byte
		var err error
		if name == "-" {
			data, err = io.ReadAll(io.LimitReader(os.Stdin, longhorn.MaxStateBytes+1))
		} else {
			data, err = readLimited(name, longhorn.MaxStateBytes+1)
		}
		if err != nil {
			return nil, fmt.Errorf("plan: read state: %w", err)
		}
		if err := l.Add(name, data); err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
	}
	c, err := l.Cluster()
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	return c, nil
}

func readLimited(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

func planNow(opts *planOpts) (time.Time, error) {
	if opts.now == "" {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339, opts.now)
	if err != nil {
		return time.Time{}, usageError{fmt.Errorf("plan: --now: %q is not an RFC 3339 time", opts.now)}
	}
	return t, nil
}

func runPlanPlace(ctx context.Context, g *globalOpts, opts *planOpts) error {
	now, err := planNow(opts)
	if err != nil {
		return err
	}
	c, err := loadPlanState(ctx, g, opts)
	if err != nil {
		return err
	}
	plan, err := longhorn.Place(c, &longhorn.PlaceOptions{Volume: opts.volume, Now: now})
	if err != nil {
		return fmt.Errorf("plan place: %w", err)
	}
	if opts.json {
		return writeJSONLine(g.stdout, plan)
	}
	_, err = io.WriteString(g.stdout, plan.Text())
	return err
}

func runPlanRebalance(ctx context.Context, g *globalOpts, opts *planOpts) error {
	now, err := planNow(opts)
	if err != nil {
		return err
	}
	ro := longhorn.RebalanceOptions{Now: now, UntilStable: opts.untilStable, MaxPasses: opts.maxPasses}
	if err := ro.Validate(); err != nil {
		return usageError{err}
	}
	c, err := loadPlanState(ctx, g, opts)
	if err != nil {
		return err
	}
	plan, err := longhorn.PlanRebalance(c, &ro)
	if plan == nil {
		return fmt.Errorf("plan rebalance: %w", err)
	}
	// At the pass limit every computed pass is printed before the error.
	var werr error
	if opts.json {
		werr = writeJSONLine(g.stdout, plan)
	} else {
		_, werr = io.WriteString(g.stdout, plan.Text())
	}
	if err != nil {
		return fmt.Errorf("plan rebalance: %w", err)
	}
	return werr
}

func runPlanCPU(ctx context.Context, g *globalOpts, opts *planOpts) error {
	// The CPU plan has no waits to evaluate, but a bad --now (inherited
	// from plan) is still bad usage, not silently ignored.
	if _, err := planNow(opts); err != nil {
		return err
	}
	c, err := loadPlanState(ctx, g, opts)
	if err != nil {
		return err
	}
	if opts.migrateFromV0 {
		changes, err := longhorn.MigrateDeprecatedCPU(c)
		if err != nil {
			return fmt.Errorf("plan cpu: %w", err)
		}
		if opts.json {
			return writeJSONLine(g.stdout, struct {
				Changes []longhorn.Change `json:"changes"`
			}{changes})
		}
		_, err = io.WriteString(g.stdout, longhorn.ChangesText(changes))
		return err
	}
	plan := longhorn.PlanCPU(c)
	if opts.json {
		err = writeJSONLine(g.stdout, plan)
	} else {
		_, err = io.WriteString(g.stdout, plan.Text())
	}
	if err != nil {
		return err
	}
	if len(plan.Errors) > 0 {
		return fmt.Errorf("%w: %d error(s), the first: %s", errCPUInvalid, len(plan.Errors), plan.Errors[0])
	}
	return nil
}
