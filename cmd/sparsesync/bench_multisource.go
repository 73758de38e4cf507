package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/internal/bytesize"
	"github.com/sparsesync/sparsesync/qos"
)

const multiSourceBenchHelp = "--scenario multisource, alone, pulls a 2 GiB image with 10% data (times --scale) from 1, 2 and 3\n" +
	"servers on 127.0.0.1, each with serve --bwlimit at the first of --bwlimit-rates: once from all three (every\n" +
	"server computes its manifest), then --runs interleaved rounds; time, wire bytes and the medians, in the\n" +
	"first --dir (default: a temporary directory).\n\n"

// runBenchMultiSource is "sparsesync bench --scenario multisource".
func runBenchMultiSource(ctx context.Context, g *globalOpts, opts *benchOpts, exe string) error {
	if len(opts.scenarios) > 1 {
		return usageError{fmt.Errorf("bench: --scenario %s runs alone", bench.ScenarioMultiSource)}
	}
	rate, err := qos.ParseRate(opts.bwlimitRates[0])
	if err != nil || rate == 0 {
		return usageError{fmt.Errorf("bench: --bwlimit-rates %q: want a rate above 0 (%s)", opts.bwlimitRates[0], qos.RateSyntax)}
	}
	dir := ""
	if len(opts.dirs) > 0 {
		dir = opts.dirs[0]
	} else {
		if dir, err = os.MkdirTemp("", "sparsesync-multisource-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	size := int64(float64(2<<30)*opts.scale) &^ (1<<20 - 1)
	cfg := bench.MultiSourceConfig{Dir: dir, Size: size, DataPercent: 10, Rate: rate, Rounds: opts.runs,
		Serve: func(root string, rate int64) []string {
			return []string{exe, "serve", "--root", root, "--listen", "127.0.0.1:0", "--no-auth", "--bwlimit", strconv.FormatInt(rate, 10)}
		},
		Pull: func(dst string, from []string) []string {
			argv := []string{exe, "pull", "--no-auth", "--json", "--progress", "never"}
			for _, f := range from {
				argv = append(argv, "--from", f)
			}
			return append(argv, dst)
		},
	}
	rows, err := bench.RunMultiSource(ctx, cfg)
	data := bench.MultiSourceLayout(cfg.Size, cfg.DataPercent).DataBytes()
	sum := bench.SummarizeMultiSource(rows, data)
	if opts.json {
		if jerr := writeJSONLine(g.stdout, struct {
			Rate    int64                      `json:"rate"`
			Size    int64                      `json:"size"`
			Data    int64                      `json:"data_bytes"`
			Rows    []bench.MultiSourceRow     `json:"rows"`
			Summary []bench.MultiSourceSummary `json:"summary"`
		}{rate, cfg.Size, data, rows, sum}); err == nil {
			err = jerr
		}
		return err
	}
	fmt.Fprintf(g.stdout, "multi-source pull: %s image, %s data, each server --bwlimit %s/s\n",
		bytesize.Format(cfg.Size), bytesize.Format(data), bytesize.Format(rate))
	tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "sources\tround\tseconds\twire\tcopied\t")
	for _, r := range rows {
		round := strconv.Itoa(r.Round)
		if r.Round == 0 {
			round = "0 (manifests computed)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%.2f\t%s\t%s\t%s\n", r.Sources, round, r.Seconds, bytesize.Format(r.WireBytes), bytesize.Format(r.CopiedBytes), r.Error)
	}
	fmt.Fprintln(tw, "\nsources\truns\tmedian seconds\tmedian wire\trate\tspeedup\t")
	for _, s := range sum {
		fmt.Fprintf(tw, "%d\t%d\t%.2f\t%s\t%s/s\t%.2fx\t\n", s.Sources, s.Runs, s.MedianSeconds, bytesize.Format(s.MedianWire),
			bytesize.Format(int64(s.Rate)), s.Speedup)
	}
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return err
}
