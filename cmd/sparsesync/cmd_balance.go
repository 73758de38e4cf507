package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/sparsesync/sparsesync/scheduler/ganeti"
)

type balanceOptions struct {
	file         string
	json         bool
	group        string
	minGain      float64
	minGainLimit float64
	minScore     float64
	maxRounds    int
	noDiskMoves  bool
}

func newBalanceCommand(g *globalOpts) *cobra.Command {
	opts := balanceOptions{}
	def := ganeti.DefaultBalanceOptions()
	def.MaxRounds = -1 // hbal's "no limit"
	cmd := &cobra.Command{
		Use:   "balance -t FILE",
		Short: "Plan instance moves that balance a Ganeti cluster, as hbal does",
		Long: `Plan instance moves that balance a Ganeti cluster, with the decisions of
Ganeti's hbal: the same cluster score, moves and checks, computed incrementally.

The cluster comes from a file in Ganeti's text backend format (hbal -t) or
in sparsesync's JSON form (a file whose first character is '{'). The output
is the initial score, the moves in order and the final score; --json prints
one object instead.
` + exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBalance(cmd.Context(), g, opts)
		},
	}
	f := cmd.Flags()
	clusterFileFlag(cmd, &opts.file)
	f.BoolVar(&opts.json, "json", false, "print the result as one JSON object")
	f.StringVarP(&opts.group, "group", "G", "", "node group to balance (needed when the cluster has several)")
	f.Float64VarP(&opts.minGain, "min-gain", "g", def.MinGain, "minimum gain per step once the score is below --min-gain-limit")
	f.Float64Var(&opts.minGainLimit, "min-gain-limit", def.MinGainLimit, "score below which --min-gain applies")
	f.Float64VarP(&opts.minScore, "min-score", "e", def.MinScore, "stop once the score is at most this")
	f.IntVarP(&opts.maxRounds, "max-length", "l", def.MaxRounds, "maximum number of moves (-1: no limit)")
	f.BoolVar(&opts.noDiskMoves, "no-disk-moves", false, "only failovers and migrations, no disk replacement")
	return cmd
}

// clusterFileFlag adds the Ganeti planners' (balance, squeeze) required
// -t/--text-data flag to cmd: the cluster file readCluster reads.
func clusterFileFlag(cmd *cobra.Command, file *string) {
	cmd.Flags().StringVarP(file, "text-data", "t", "", "cluster file (Ganeti text format or JSON)")
	_ = cmd.MarkFlagRequired("text-data")
}

// readCluster reads a cluster file in Ganeti's text format or, when its
// first non-blank character is '{', in JSON.
// runPlanner is balance's and squeeze's run: options that cannot be used
// are a usage error, then FILE is read and planned.
func runPlanner[O interface{ Validate() error }, R any](cmd, file string, o O, plan func(*ganeti.Cluster, O) (R, error)) (R, error) {
	var none R
	if err := o.Validate(); err != nil {
		return none, usageError{err}
	}
	c, err := readCluster(file)
	if err != nil {
		return none, fmt.Errorf("%s: %w", cmd, err)
	}
	res, err := plan(c, o)
	if err != nil {
		return none, fmt.Errorf("%s: %s: %w", cmd, file, err)
	}
	return res, nil
}

func readCluster(path string) (*ganeti.Cluster, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	head, _ := br.Peek(512)
	if trimmed := bytes.TrimLeft(head, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		return ganeti.ReadJSON(br, path)
	}
	return ganeti.ReadText(br, path)
}

func runBalance(ctx context.Context, g *globalOpts, opts balanceOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	bo := ganeti.BalanceOptions{
		MinGain: hbalFloat(opts.minGain), MinGainLimit: hbalFloat(opts.minGainLimit), MinScore: hbalFloat(opts.minScore),
		NoDiskMoves: opts.noDiskMoves, Group: opts.group,
	}
	switch {
	case opts.maxRounds == 0: // hbal -l 0: no move, only the score
		bo.MaxRounds = -1
	case opts.maxRounds > 0:
		bo.MaxRounds = opts.maxRounds
	}
	res, err := runPlanner("balance", opts.file, &bo, ganeti.Balance)
	if err != nil {
		return err
	}
	if res.Moves == nil {
		res.Moves = []ganeti.PlannedMove{}
	}
	if opts.json {
		return writeJSONLine(g.stdout, res)
	}
	return printBalance(g.stdout, res)
}

// hbalFloat maps an hbal threshold to BalanceOptions, where 0 means the
// default: hbal's 0 (no threshold) is any negative value there.
func hbalFloat(v float64) float64 {
	if v == 0 {
		return -1
	}
	return v
}

func printBalance(w io.Writer, res *ganeti.BalanceResult) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "Initial score: %.8f\n", res.InitialScore)
	for i, m := range res.Moves {
		from, to := m.FromPrimary, m.ToPrimary
		if m.FromSecondary != "" || m.ToSecondary != "" {
			from += ":" + m.FromSecondary
			to += ":" + m.ToSecondary
		}
		fmt.Fprintf(bw, "%5d. %s %s => %s %.8f %s\n", i+1, m.Instance, from, to, m.Score, m.KindName)
	}
	fmt.Fprintf(bw, "Final score: %.8f\n", res.FinalScore)
	return bw.Flush()
}
