package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparsesync/sparsesync/internal/bytesize"
	"github.com/sparsesync/sparsesync/localsync"
)

// localOpts are the flags of "sparsesync local".
type localOpts struct {
	method, reflink, progress   string
	atomic, noSync, detectZeros bool
	fullCompare                 bool
	manifest                    bool
	json                        bool
	progressDelay               time.Duration
	qos                         qosFlags
}

// localManifestDefault is local's --manifest default, which bench exec
// follows too.
const localManifestDefault = true

func newLocalCommand(g *globalOpts) *cobra.Command {
	opts := &localOpts{progressDelay: time.Second}
	cmd := &cobra.Command{
		Use:   "local [flags] SRC DST",
		Short: "Copy or re-sync a sparse file or block device on this machine",
		Long: "local makes DST an exact copy of SRC: the same bytes, the same size, holes where SRC has holes.\n" +
			"A new DST is a reflink (XFS, btrfs) or a copy of the data extents only; an existing DST is\n" +
			"re-synced, writing only the blocks that differ and punching holes where SRC has them.\n" +
			"SRC or DST may be a block device. DST is fdatasync'ed before success is reported.\n\n" +
			"Examples:\n" +
			"  sparsesync local disk.img /mnt/new/disk.img\n" +
			"  sparsesync local --atomic --json vm.raw backup/vm.raw\n\n" +
			"--json prints one object {\"src\", \"dst\", \"size\", \"data_bytes\", \"cloned_bytes\", \"copied_bytes\",\n" +
			"\"unchanged_bytes\", \"punched_bytes\", \"zero_filled_bytes\" (zeros written where a hole could not be\n" +
			"punched, e.g. on a block device), \"zero_bytes\" (all-zero source blocks left as holes, --detect-zeros),\n" +
			"\"direct_read_bytes\" (re-sync reads that bypassed the page cache), \"manifest_bytes\" (DST bytes not read because\n" +
			"the digests DST.sparsesync keeps matched SRC), \"quick_check\" (DST was marked as\n" +
			"synced from this very SRC version and neither file changed since: nothing was read), \"method\", \"seconds\",\n" +
			"\"bwlimit\" (bytes per second, 0: unlimited), \"throttled_seconds\" (how long the copy waited on\n" +
			"--bwlimit: its parallel workers' waits, averaged)}.\n\n" +
			"A re-sync that compares keeps DST.sparsesync next to DST (mode 0600): a keyed digest of each 64 KiB\n" +
			"block it compared, valid while DST is unchanged. The next re-sync reads DST only where SRC's digest\n" +
			"differs (--manifest=false: no sidecar, every compared block is read from both files).\n\n" +
			"--bwlimit RATE bounds what SRC and DST are read at and what DST is written at, each on its own: a full\n" +
			"copy of D bytes of data takes about D/RATE, a re-sync (which reads both files) about 2D/RATE. Clones\n" +
			"move no bytes and are not limited.\n" +
			exitCodesHelp,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLocal(cmd.Context(), g, opts, args[0], args[1])
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.method, "method", "auto", "copy method: auto, reflink, copy-range or read-write")
	f.StringVar(&opts.reflink, "reflink", "auto", "share blocks with SRC: auto, always (fail if impossible) or never")
	f.BoolVar(&opts.atomic, "atomic", false, "write a temporary file and rename it over DST when complete")
	f.BoolVar(&opts.noSync, "no-sync", false, "do not fdatasync DST at the end")
	f.BoolVar(&opts.fullCompare, "full-compare", false, "compare every block even if DST is marked as synced from this SRC version")
	f.BoolVar(&opts.manifest, "manifest", localManifestDefault, "keep DST.sparsesync, digests that spare the next re-sync its reads of DST")
	f.BoolVar(&opts.detectZeros, "detect-zeros", false, "turn all-zero blocks of SRC's data into holes")
	opts.qos.registerTransfer(f, &opts.json, &opts.progress)
	return cmd
}

// localResult is the --json output: exactly these keys.
type localResult struct {
	Src             string  `json:"src"`
	Dst             string  `json:"dst"`
	Size            int64   `json:"size"`
	DataBytes       int64   `json:"data_bytes"`
	ClonedBytes     int64   `json:"cloned_bytes"`
	CopiedBytes     int64   `json:"copied_bytes"`
	UnchangedBytes  int64   `json:"unchanged_bytes"`
	PunchedBytes    int64   `json:"punched_bytes"`
	ZeroFilledBytes int64   `json:"zero_filled_bytes"`
	ZeroBytes       int64   `json:"zero_bytes"`
	DirectReadBytes int64   `json:"direct_read_bytes"`
	ManifestBytes   int64   `json:"manifest_bytes"`
	QuickCheck      bool    `json:"quick_check"`
	Method          string  `json:"method"`
	Seconds         float64 `json:"seconds"`
	Bwlimit         int64   `json:"bwlimit"`
	ThrottledSecs   float64 `json:"throttled_seconds"`
}

// methodName is Stats.Method as printed: "none" when no data had to move.
func methodName(m localsync.Method) string {
	if m == localsync.MethodAuto {
		return "none"
	}
	return m.String()
}

func localOptions(opts *localOpts) (localsync.Options, error) {
	m, err := localsync.ParseMethod(opts.method)
	if err != nil {
		return localsync.Options{}, usageError{fmt.Errorf("--method: %w", err)}
	}
	r, err := localsync.ParseReflink(opts.reflink)
	if err != nil {
		return localsync.Options{}, usageError{fmt.Errorf("--reflink: %w", err)}
	}
	budget, _, err := opts.qos.budget()
	if err != nil {
		return localsync.Options{}, err
	}
	o := localsync.Options{Method: m, Reflink: r, Atomic: opts.atomic, NoSync: opts.noSync, DetectZeros: opts.detectZeros,
		FullCompare: opts.fullCompare, Manifest: opts.manifest, Budget: budget}
	if err := o.Validate(); err != nil {
		return o, usageError{err}
	}
	return o, nil
}

func runLocal(ctx context.Context, g *globalOpts, opts *localOpts, src, dst string) error {
	o, err := localOptions(opts)
	if err != nil {
		return err
	}
	bar, err := g.startBar(opts.progress, "local", g.delay(opts.progressDelay), func() sampleFunc {
		var c progressCounter
		o.Progress = c.update
		return c.sample
	})
	if err != nil {
		return err
	}
	dst = intoDir(dst, src) // like cp: DST a directory means DST/SRC's name
	var before dstState
	if !o.Atomic {
		before = statDst(dst)
	}
	st, err := localsync.Copy(ctx, src, dst, &o)
	bar.Stop() // before the result: it must stand on a line of its own
	if err != nil {
		if errors.Is(err, localsync.ErrInvalidOptions) {
			return usageError{err}
		}
		return partial(fmt.Errorf("local %s -> %s: %w", src, dst, err), dst, before)
	}
	if opts.json {
		return writeJSONLine(g.stdout, localResult{
			Src: src, Dst: dst, Size: st.Size, DataBytes: st.DataBytes, ClonedBytes: st.ClonedBytes,
			CopiedBytes: st.CopiedBytes, UnchangedBytes: st.UnchangedBytes, PunchedBytes: st.PunchedBytes,
			ZeroFilledBytes: st.ZeroedBytes, ZeroBytes: st.ZeroBytes, DirectReadBytes: st.DirectReadBytes,
			ManifestBytes: st.ManifestBytes,
			QuickCheck:    st.QuickCheck,
			Method:        methodName(st.Method), Seconds: st.Elapsed.Seconds(),
			Bwlimit: o.Budget.Read.Rate(), ThrottledSecs: st.Throttled.Seconds(),
		})
	}
	_, err = io.WriteString(g.stdout, statsText(src, dst, st))
	return err
}

// statsText is the human summary of a copy.
func statsText(src, dst string, st localsync.Stats) string {
	s := fmt.Sprintf("%s -> %s: size %s, data %s: cloned %s, copied %s, unchanged %s, punched %s",
		src, dst, bytesize.Format(st.Size), bytesize.Format(st.DataBytes), bytesize.Format(st.ClonedBytes),
		bytesize.Format(st.CopiedBytes), bytesize.Format(st.UnchangedBytes), bytesize.Format(st.PunchedBytes))
	if st.ZeroedBytes > 0 {
		s += fmt.Sprintf(", zero-filled %s (no hole punching)", bytesize.Format(st.ZeroedBytes))
	}
	if st.ZeroBytes > 0 {
		s += fmt.Sprintf(", zero blocks left as holes %s", bytesize.Format(st.ZeroBytes))
	}
	if st.QuickCheck {
		s += "; quick check: DST already held this SRC version, nothing read"
	}
	if st.Throttled > 0 {
		s += fmt.Sprintf(", waited %.3fs on --bwlimit", st.Throttled.Seconds())
	}
	return s + fmt.Sprintf(" (%s, %.3fs)\n", methodName(st.Method), st.Elapsed.Seconds())
}
