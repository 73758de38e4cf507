package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/internal/bytesize"
	"github.com/sparsesync/sparsesync/qos"
)

// runBenchBwlimit is "sparsesync bench --scenario bwlimit": how well this
// binary's --bwlimit holds at each rate of --bwlimit-rates, in each place.
func runBenchBwlimit(ctx context.Context, g *globalOpts, opts *benchOpts, exe string, places []bench.Place) error {
	var rates []int64
	for _, s := range opts.bwlimitRates {
		r, err := qos.ParseRate(s)
		if err != nil || r == 0 {
			return usageError{fmt.Errorf("bench: --bwlimit-rates %q: want rates above 0 (%s)", s, qos.RateSyntax)}
		}
		rates = append(rates, r)
	}
	rs := func(rate int64) string { return strconv.FormatInt(rate, 10) }
	cfg := bench.BwlimitConfig{
		Places: places, Rates: rates,
		// --reflink never: a clone moves no bytes and is not limited, so on
		// XFS and btrfs there would be nothing to measure.
		Local: func(src, dst string, rate int64) []string {
			return []string{exe, "local", "--bwlimit", rs(rate), "--reflink", "never", "--progress", "never", src, dst}
		},
		Serve: func(root string) []string {
			return []string{exe, "serve", "--root", root, "--listen", "127.0.0.1:0", "--no-auth"}
		},
		Push: func(src, addr, remote string, rate int64) []string {
			return []string{exe, "push", "--no-auth", "--bwlimit", rs(rate), "--retries", "0", "--progress", "never", src, addr, remote}
		},
	}
	rows, err := bench.RunBwlimit(ctx, cfg)
	if opts.json {
		if jerr := writeJSONLine(g.stdout, rows); err == nil {
			err = jerr
		}
		return err
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "place\tmode\tlimit\tmeasured\tseconds\tmedian second\tbusiest second\tper second / limit\t")
	var failed []string
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s/s\t\t\t\t\tfailed (%d, below)\t\n", filepath.Base(r.Place), r.Mode, bytesize.Format(r.Rate), len(failed)+1)
			failed = append(failed, r.Error)
			continue
		}
		var ws []string
		for _, w := range r.Windows {
			ws = append(ws, strconv.FormatFloat(w, 'f', 2, 64))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s/s\t%s\t%.1f\t%.3f\t%.3f\t%s\t\n", filepath.Base(r.Place), r.Mode, bytesize.Format(r.Rate),
			r.Measure, r.Seconds, r.Median, r.Max, strings.Join(ws, " "))
	}
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	for i, f := range failed {
		fmt.Fprintf(g.stdout, "failed (%d): %s\n", i+1, f)
	}
	return err
}
