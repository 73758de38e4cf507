package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparsesync/sparsesync/internal/bytesize"
	"github.com/sparsesync/sparsesync/replica"
)

type replicaExportOptions struct {
	json     bool
	progress string
	qos      qosFlags
}

func newReplicaExportCommand(g *globalOpts) *cobra.Command {
	opts := replicaExportOptions{}
	cmd := &cobra.Command{
		Use:   "export [--json] DIR OUT",
		Short: "Merge a replica's snapshot chain and head into one sparse image",
		Long: `Write the volume held by the replica directory DIR (ours or Longhorn's, not
open by a writer) to the sparse image OUT: the head merged with its snapshot
chain, the newest layer winning per 4 KiB block, holes left as holes. Only
the data is read (each layer's extents come from SEEK_DATA/SEEK_HOLE), so
the time follows the data, not the volume size. OUT is replaced only once
the image is complete and synced; a block device is written in place.

--json prints one object {"dir", "out", "size", "data_bytes", "layers",
"seconds", "bwlimit"}.

--bwlimit RATE bounds the reads from DIR and the writes to OUT, each to RATE
(see docs/qos.md); --ionice sets this process's I/O priority.
` + exitCodesHelp,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplicaExport(cmd.Context(), g, opts, args[0], args[1])
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object")
	cmd.Flags().StringVar(&opts.progress, "progress", "auto", "progress bar on stderr: auto (on a terminal), always or never")
	opts.qos.register(cmd.Flags())
	return cmd
}

type replicaExportResult struct {
	Dir       string  `json:"dir"`
	Out       string  `json:"out"`
	Size      int64   `json:"size"`
	DataBytes int64   `json:"data_bytes"`
	Layers    int     `json:"layers"`
	Seconds   float64 `json:"seconds"`
	Bwlimit   int64   `json:"bwlimit"`
}

func runReplicaExport(ctx context.Context, g *globalOpts, opts replicaExportOptions, dir, out string) error {
	budget, rate, err := opts.qos.budget()
	if err != nil {
		return err
	}
	bar, err := g.startBar(opts.progress, "export", g.delay(time.Second), func() sampleFunc { return exportSampler(ctx, dir, out) })
	if err != nil {
		return err
	}
	st, err := replica.Export(ctx, dir, out, &replica.ExportOptions{Budget: budget})
	bar.Stop()
	if err != nil {
		return fmt.Errorf("replica export: %w", err)
	}
	if opts.json {
		return writeJSONLine(g.stdout, replicaExportResult{Dir: dir, Out: out, Size: st.Size, DataBytes: st.DataBytes,
			Layers: st.Layers, Seconds: st.Elapsed.Seconds(), Bwlimit: rate})
	}
	_, err = fmt.Fprintf(g.stdout, "exported %s to %s: %s volume, %s data from %d %s, %.2f s\n",
		dir, out, bytesize.Format(st.Size), bytesize.Format(st.DataBytes), st.Layers, plural(st.Layers, "layer", "layers"), st.Elapsed.Seconds())
	return err
}

// exportSampler samples the bytes written to OUT's new files (the image, or
// its temporary twin) against the volume's data bytes. A block device OUT
// is written in place and cannot be watched: no bar.
func exportSampler(ctx context.Context, dir, out string) sampleFunc {
	if fi, err := os.Stat(out); err == nil && !fi.Mode().IsRegular() {
		return nil
	}
	c, err := replica.OpenChain(dir)
	if err != nil {
		return nil // Export reports it
	}
	m, err := c.Map(ctx)
	c.Close()
	if err != nil {
		return nil
	}
	parent := filepath.Dir(out)
	keep := newFilesIn(parent)
	return fileSampler(m.Bytes(), func() int64 { return dirAllocated(parent, keep) })
}
