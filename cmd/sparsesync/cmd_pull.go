package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sparsesync/sparsesync/tcpsync"
)

func newPullCommand(g *globalOpts) *cobra.Command {
	opts := netOptions{}
	var multi multiFlags
	cmd := &cobra.Command{
		Use:   "pull [flags] ADDR REMOTE DST | pull --from ADDR/REMOTE --from ADDR2/REMOTE2 ... DST",
		Short: "Fetch a sparse file from a sparsesync server, only what differs",
		Long: `Fetch REMOTE (a path relative to the server's --root) from the server at
ADDR into the local file DST, creating it if needed. Only data DST lacks
travels, the result is verified end to end, and DST.tcpsync records
progress so an interrupted pull resumes.

DST.tcpsync stays after success, on purpose: it records the source
version DST holds, so pulling an unchanged source again ends after one
round trip (--full-compare ignores it). Deleting it is harmless: the next
pull compares every block. A permanent error (nothing listening, unknown
host, TLS or pin failure, wrong token, DST not writable) fails at once; a
dropped connection or a timeout is retried (--retries) and each retry is
announced on stderr.

--json prints one object {"src", "dst", "size", "data_bytes",
"copied_bytes", "unchanged_bytes", "punched_bytes", "wire_bytes_sent",
"wire_bytes_received", "seconds", "verified", "read_back", "bwlimit",
"throttled_seconds"}. --read-back on (the default with --atomic) reads
DST back from storage after its fdatasync and checks it whole against the
source.

--bwlimit RATE bounds, each on its own, what this side writes to DST and
reads of it (comparison, read-back) and what it sends and receives on the
network; the server's own limit (serve --bwlimit) applies on its side
too. "throttled_seconds" is how long this side waited on it. --ionice
sets this process's I/O priority.
` + multiPullHelp + exitCodesHelp,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(multi.from) > 0 {
				return exactArgs(1)(cmd, args)
			}
			return exactArgs(3)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(multi.from) > 0 {
				return runPullMulti(cmd.Context(), g, opts, multi, args[0])
			}
			return runPull(cmd.Context(), g, opts, args[0], args[1], args[2])
		},
	}
	opts.register(cmd.Flags())
	multi.register(cmd.Flags())
	return cmd
}

func runPull(ctx context.Context, g *globalOpts, opts netOptions, addr, remote, dst string) error {
	dst = intoDir(dst, remote) // like rsync: DST a directory means DST/REMOTE's name
	var before dstState
	if !opts.atomic {
		before = statDst(dst)
	}
	st, err := transfer(g, opts, addr, "pull", func(co *tcpsync.Options, _ func(string)) (tcpsync.Stats, error) {
		return tcpsync.Pull(ctx, addr, remote, dst, co)
	})
	if err != nil {
		return partial(fmt.Errorf("pull %s %s to %s: %w", addr, remote, dst, err), dst, before)
	}
	return printResult(g, opts, "pulled", "tcp://"+addr+"/"+remote, dst, st)
}
