package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sparsesync/sparsesync/internal/bytesize"
	"github.com/sparsesync/sparsesync/sparse"
)

type extentsOptions struct {
	json    bool
	showMap string // auto, always, never
}

func newExtentsCommand(g *globalOpts) *cobra.Command {
	var opts extentsOptions
	cmd := &cobra.Command{
		Use:   "extents [flags] FILE",
		Short: "Show where a file's data and holes are",
		Long: `Show a file's size, data bytes, allocated bytes, and its data extents, found with
SEEK_DATA/SEEK_HOLE (the cost grows with the number of extents, never with the size).
On a terminal a one-line map shows where data (#: mostly data, +: some data) and holes (.)
lie across the file, with its legend. Block devices are shown as one data extent over the
whole device.

Data is what every command (extents, local, push, pull) counts and moves: the ranges
SEEK_DATA reports, less those that are allocated but unwritten (preallocated) and hold
no pending write: they read as zeros and are holes. (ext4 and XFS report such ranges as
data once zero pages are cached over them; without this rule the figure would change
with the page cache.) "allocated" counts every allocated block, unwritten ones too.

--json prints exactly one object:
  {"path", "size", "data_bytes", "allocated_bytes", "extents": [{"offset", "length"}, ...]}
` + exitCodesHelp,
		Example: `  sparsesync extents disk.img
  sparsesync extents --json disk.img | jq '.extents | length'`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExtents(cmd.Context(), g, opts, args[0])
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object")
	cmd.Flags().StringVar(&opts.showMap, "map", "auto", "draw the one-line map: auto (on a terminal), always, never")
	return cmd
}

type extentJSON struct {
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
}

type extentsJSON struct {
	Path           string       `json:"path"`
	Size           int64        `json:"size"`
	DataBytes      int64        `json:"data_bytes"`
	AllocatedBytes int64        `json:"allocated_bytes"`
	Extents        []extentJSON `json:"extents"`
}

func runExtents(ctx context.Context, g *globalOpts, opts extentsOptions, path string) error {
	switch opts.showMap {
	case "auto", "always", "never":
	default:
		return usageError{fmt.Errorf("extents: --map must be auto, always or never, not %q", opts.showMap)}
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("extents: %w", err)
	}
	defer f.Close()
	w, err := sparse.NewWalker(f)
	if err != nil {
		return fmt.Errorf("extents: %w", err)
	}
	m, err := w.DataMap(ctx)
	if err != nil {
		return fmt.Errorf("extents: %w", err)
	}
	info := w.Info()
	out := bufio.NewWriter(g.stdout)
	if opts.json {
		doc := extentsJSON{Path: path, Size: m.Size(), DataBytes: m.Bytes(), AllocatedBytes: info.Allocated, Extents: make([]extentJSON, 0, m.Len())}
		for _, e := range m.Extents() {
			doc.Extents = append(doc.Extents, extentJSON{e.Off, e.Len})
		}
		if err := writeJSONLine(out, doc); err != nil {
			return err
		}
		return out.Flush()
	}
	fmt.Fprintf(out, "path:       %s\n", path)
	fmt.Fprintf(out, "size:       %d (%s)\n", m.Size(), bytesize.Format(m.Size()))
	fmt.Fprintf(out, "data:       %d (%s, %s)\n", m.Bytes(), bytesize.Format(m.Bytes()), percent(m.Bytes(), m.Size()))
	fmt.Fprintf(out, "allocated:  %d (%s)\n", info.Allocated, bytesize.Format(info.Allocated))
	fmt.Fprintf(out, "extents:    %d\n", m.Len())
	if !w.HolesKnown() {
		fmt.Fprintln(out, "holes:      unknown (the filesystem or device cannot report holes; the whole file is shown as data)")
	}
	if opts.showMap == "always" || (opts.showMap == "auto" && isTerminal(g.stdout)) {
		width := terminalWidth(g.stdout, 80) - 2
		fmt.Fprintf(out, "[%s]\n", dataMapLine(m, width))
		fmt.Fprintf(out, "map:        # mostly data, + some data, . hole; one character is %s\n", bytesize.Format((m.Size()+int64(width)-1)/int64(max(width, 1))))
	}
	if m.Len() > 0 {
		fmt.Fprintf(out, "%-20s %-20s %s\n", "OFFSET", "LENGTH", "END")
		for _, e := range m.Extents() {
			fmt.Fprintf(out, "%-20d %-20d %d\n", e.Off, e.Len, e.End())
		}
	}
	return out.Flush()
}

// dataMapLine draws m in width cells: '#' where a cell is at least half
// data, '+' where it holds some data, '.' where it is all hole. A file
// smaller than width bytes gets one cell per byte.
func dataMapLine(m sparse.Map, width int) string {
	width = max(width, 1)
	size := m.Size()
	if size == 0 {
		return strings.Repeat(" ", width)
	}
	width = int(min(int64(width), size)) // every cell covers at least one byte
	cells := make([]int64, width)        // data bytes per cell
	cellStart := func(i int) int64 { return int64(float64(size) * float64(i) / float64(width)) }
	for _, e := range m.Extents() {
		first := int(float64(e.Off) / float64(size) * float64(width))
		for i := min(first, width-1); i < width; i++ {
			lo, hi := max(cellStart(i), e.Off), min(cellStart(i+1), e.End())
			if i == width-1 {
				hi = min(size, e.End())
			}
			if lo >= e.End() {
				break
			}
			if hi > lo {
				cells[i] += hi - lo
			}
		}
	}
	var b strings.Builder
	for i, n := range cells {
		cellLen := cellStart(i+1) - cellStart(i)
		if i == width-1 {
			cellLen = size - cellStart(i)
		}
		switch {
		case n == 0:
			b.WriteByte('.')
		case 2*n >= cellLen:
			b.WriteByte('#')
		default:
			b.WriteByte('+')
		}
	}
	return b.String()
}
