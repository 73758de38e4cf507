package bench

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/sparsesync/sparsesync/internal/bytesize"
)

// WriteTable writes the report as a terminal table: one row per tool and
// case, with the median wall time and its range, the time over the floor,
// sparsesync's time over the tool's (a network peer's: sparsesync's network
// sync's), peak RSS, the bytes written to the target device and the bytes
// on the wire; skipped tools and errors follow the table.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tscenario\tplace\ttool\tmedian s\tmin s\tmax s\tx floor\tsparsesync/tool\tbusy cpu s\tcpu sparsesync/tool\tpeak RSS\twritten\twire\t")
	var notes []string
	for _, c := range r.Cases {
		for _, t := range append([]Tool{c.Floor}, c.Tools...) {
			if t.Skipped != "" {
				notes = append(notes, fmt.Sprintf("%s %s %s: %s skipped: %s", c.Workload, c.Scenario, c.Place, t.Name, t.Skipped))
				continue
			}
			if t.WrongResult != "" {
				notes = append(notes, fmt.Sprintf("%s %s %s: %s left a WRONG RESULT: %s", c.Workload, c.Scenario, c.Place, t.Name, t.WrongResult))
			}
			if t.Error != "" {
				notes = append(notes, fmt.Sprintf("%s %s %s: %s: %s", c.Workload, c.Scenario, c.Place, t.Name, t.Error))
			}
			if !t.Measured() {
				continue
			}
			ratio, floor, rss, written, wire := "-", "-", "-", "n/a", "-"
			busy, busyRatio := "-", "-"
			if t.BusyCPU.N > 0 {
				busy = fmt.Sprintf("%.2f", t.BusyCPU.Median)
			}
			if t.BusyCPURatio > 0 {
				busyRatio = fmt.Sprintf("%.2f", t.BusyCPURatio)
			}
			if t.SparsesyncRatio > 0 {
				ratio = fmt.Sprintf("%.2f", t.SparsesyncRatio)
				if t.RatioBase != "" {
					ratio += " (" + t.RatioBase + ")"
				}
			}
			if t.WireBytes.N > 0 {
				wire = bytesize.Format(t.WireBytes.Median)
			}
			if t.FloorRatio > 0 {
				floor = fmt.Sprintf("%.2f", t.FloorRatio)
			}
			if t.PeakRSS.Median > 0 {
				rss = bytesize.Format(t.PeakRSS.Median)
			}
			if c.DeviceStats && t.DeviceWritten.N > 0 {
				written = bytesize.Format(t.DeviceWritten.Median)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.3f\t%.3f\t%.3f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c.Workload, c.Scenario, c.Place, t.Name,
				t.Wall.Median, t.Wall.Min, t.Wall.Max, floor, ratio, busy, busyRatio, rss, written, wire)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		if _, err := fmt.Fprintln(w, n); err != nil {
			return err
		}
	}
	return nil
}
