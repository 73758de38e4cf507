package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sparsesync/sparsesync/scheduler/ganeti"
)

type squeezeOptions struct {
	file      string
	json      bool
	minimal   float64
	target    float64
	drbd      bool
	all       bool
	commands  bool
	noHeaders bool
	verbose   int
	search    string
}

func newSqueezeCommand(g *globalOpts) *cobra.Command {
	opts := squeezeOptions{}
	cmd := &cobra.Command{
		Use:   "squeeze -t FILE",
		Short: "Decide which Ganeti nodes to power down or up, as hsqueeze does",
		Long: `Decide which nodes of a Ganeti cluster to power down (or which standby
nodes to power up), with the decisions of Ganeti's hsqueeze, far faster.

If some node lacks room for --minimal-resources standard instances, standby
nodes (offline, tagged htools:standby:*) are powered up: the shortest prefix
of the standby list that, with balancing, gives every node that room.
Otherwise nodes hosting only externally mirrored instances are freed
greedily while every node keeps room for --target-resources instances.

By default only externally mirrored instances move; --drbd also moves DRBD
instances; --all moves every instance hbal would move, which is exactly what
hsqueeze does.

--search exact runs hsqueeze's algorithm; bounded takes the same moves and
decisions but skips the migrations a lower bound on their score rules out
(much faster). pruned tries each instance only on the best-ranked nodes for
its size, and incremental also continues from the last accepted state instead
of re-balancing every candidate set: both are approximate (incremental is not
always hsqueeze's decision). auto is bounded unless many DRBD instances may
move (--drbd/--all with more than 750,000 movable DRBD instance x node
pairs, about 1,500 on 500 nodes), then pruned or incremental; -v names
the search used.

Output: 'Nodes to offline', 'Nodes to online' or 'No action', then the node
names; -C adds the moves, tag and power commands; --json prints one object
{"action", "nodes", "moves", "commands", "score_before", "score_after"}.
` + exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSqueeze(cmd.Context(), g, opts)
		},
	}
	f := cmd.Flags()
	clusterFileFlag(cmd, &opts.file)
	f.BoolVar(&opts.json, "json", false, "print the decision as one JSON object")
	f.Float64Var(&opts.minimal, "minimal-resources", 2.0, "power nodes up when some node has room for fewer standard instances than this")
	f.Float64Var(&opts.target, "target-resources", 2.0, "room, in standard instances, every node keeps when nodes are powered down")
	f.BoolVar(&opts.drbd, "drbd", false, "also move DRBD instances")
	f.BoolVar(&opts.all, "all", false, "move every instance hbal would move (hsqueeze's behaviour)")
	f.BoolVarP(&opts.commands, "print-commands", "C", false, "print the moves, tag and power commands")
	f.BoolVar(&opts.noHeaders, "no-headers", false, "do not print the action header")
	f.CountVarP(&opts.verbose, "verbose", "v", "more output (twice: candidate lists and notes)")
	f.StringVar(&opts.search, "search", "auto", "search strategy: exact (hsqueeze's), bounded (same decisions, faster), pruned or incremental (approximate), or auto")
	return cmd
}

func runSqueeze(ctx context.Context, g *globalOpts, opts squeezeOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if opts.drbd && opts.all {
		return usageError{errors.New("--drbd and --all are exclusive")}
	}
	so := ganeti.SqueezeOptions{MinimalResources: opts.minimal, TargetResources: opts.target, MinimalSet: true, TargetSet: true}
	switch {
	case opts.all:
		so.Moves = ganeti.MoveAll
	case opts.drbd:
		so.Moves = ganeti.MoveDRBD
	}
	switch opts.search {
	case "", "auto":
	case "exact":
		so.Search = ganeti.SearchExact
	case "bounded":
		so.Search = ganeti.SearchBounded
	case "pruned":
		so.Search = ganeti.SearchPruned
	case "incremental":
		so.Search = ganeti.SearchIncremental
	default:
		return usageError{fmt.Errorf("--search: want auto, exact, bounded, pruned or incremental, got %q", opts.search)}
	}
	res, err := runPlanner("squeeze", opts.file, &so, ganeti.Squeeze)
	if err != nil {
		return err
	}
	if opts.verbose > 0 {
		fmt.Fprintf(g.stderr, "search: %s (%d balancing runs, %d steps, %d candidate sets ruled out by resource totals)\n",
			res.Search, res.Stats.Balances, res.Stats.Steps, res.Stats.Pruned)
	}
	if opts.json {
		out := struct {
			Action      string               `json:"action"`
			Nodes       []string             `json:"nodes"`
			Moves       []ganeti.SqueezeMove `json:"moves"`
			Commands    []string             `json:"commands"`
			ScoreBefore float64              `json:"score_before"`
			ScoreAfter  float64              `json:"score_after"`
		}{res.Action, res.Nodes, res.Moves, res.Commands, res.ScoreBefore, res.ScoreAfter}
		return writeJSONLine(g.stdout, out)
	}
	return printSqueeze(g.stdout, res, opts)
}

func printSqueeze(w io.Writer, res *ganeti.SqueezeResult, opts squeezeOptions) error {
	bw := bufio.NewWriter(w)
	if opts.verbose > 1 {
		fmt.Fprintf(bw, "Offline candidates: %s\n", joinComma(res.OfflineCandidates))
		fmt.Fprintf(bw, "Online candidates: %s\n", joinComma(res.OnlineCandidates))
	}
	if !opts.noHeaders {
		switch res.Action {
		case ganeti.ActionOffline:
			fmt.Fprintln(bw, "'Nodes to offline'")
		case ganeti.ActionOnline:
			fmt.Fprintln(bw, "'Nodes to online'")
		default:
			fmt.Fprintln(bw, "'No action'")
		}
	}
	for _, n := range res.Nodes {
		fmt.Fprintln(bw, n)
	}
	if opts.verbose > 1 {
		for _, n := range res.Notes {
			fmt.Fprintln(bw, n)
		}
	}
	if opts.commands {
		fmt.Fprintln(bw)
		fmt.Fprintln(bw, "Commands to run:")
		if res.Action == ganeti.ActionNone {
			fmt.Fprintln(bw, "  echo Nothing to do")
		}
		// Ganeti's layout: a blank line before each section, jobs and
		// commands indented under their section.
		for i, c := range res.Commands {
			if isSection(c) {
				if !(i == 0 && c == "echo Power Commands") {
					fmt.Fprintln(bw, "  ")
				}
				fmt.Fprintln(bw, "  "+c)
				continue
			}
			fmt.Fprintln(bw, "    "+c)
		}
	}
	return bw.Flush()
}

func isSection(c string) bool {
	return strings.HasPrefix(c, "echo jobset ") || c == "echo Tagging Commands" || c == "echo Power Commands"
}

func joinComma(xs []string) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}
