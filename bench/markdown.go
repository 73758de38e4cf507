package bench

import (
	"fmt"
	"io"
	"strings"

	"github.com/sparsesync/sparsesync/internal/bytesize"
)

// WriteMarkdown writes the report as one Markdown table (for a README):
// per case, sparsesync's median wall time, its paired ratio to the floor,
// and its paired ratio to every peer (sparsesync's time over the peer's:
// below 1, sparsesync is faster; a network peer's ratio is that of
// sparsesync's network sync, serve and push over 127.0.0.1, whose time,
// ratio to the floor and bytes on the wire get their own columns when it
// ran). A skipped peer shows "skip", a peer that
// left a wrong result shows its ratio with "(wrong)".
func (r *Report) WriteMarkdown(w io.Writer) error {
	var peers []string
	seen, network := map[string]bool{}, map[string]bool{}
	hasNet := false
	for _, c := range r.Cases {
		for _, t := range c.Tools[1:] {
			if t.Name == SparsesyncNet {
				hasNet = hasNet || t.Measured()
				continue // its own columns: the base of the network peers' ratios
			}
			network[t.Name] = network[t.Name] || t.Network
			if !seen[t.Name] {
				seen[t.Name] = true
				peers = append(peers, t.Name)
			}
		}
	}
	var b strings.Builder
	b.WriteString("| workload | scenario | fs | data | sparsesync s (min-max) | floor s | x floor |")
	netCols := 0
	if hasNet {
		b.WriteString(" sparsesync-tcp s (min-max) | tcp x floor | tcp wire |")
		netCols = 3
	}
	for _, p := range peers {
		if network[p] {
			fmt.Fprintf(&b, " vs %s (tcp) |", p)
		} else {
			fmt.Fprintf(&b, " vs %s |", p)
		}
	}
	b.WriteString("\n|---|---|---|---|---|---|---|" + strings.Repeat("---|", netCols+len(peers)) + "\n")
	for _, c := range r.Cases {
		ss := c.Tools[0]
		data := bytesize.Format(c.DataBytes)
		if c.ChangedBytes > 0 {
			data = bytesize.Format(c.ChangedBytes) + " of " + data
		}
		if !ss.Measured() {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | failed: %s | | |%s\n", c.Workload, c.Scenario, c.FSType, data, ss.Error, strings.Repeat(" |", netCols+len(peers)))
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %.3f (%.3f-%.3f) | %.3f | %.2f |", c.Workload, c.Scenario, c.FSType, data,
			ss.Wall.Median, ss.Wall.Min, ss.Wall.Max, c.Floor.Wall.Median, ss.FloorRatio)
		if hasNet {
			cells := " skip | | |"
			for _, t := range c.Tools {
				if t.Name == SparsesyncNet && t.Measured() {
					cells = fmt.Sprintf(" %.3f (%.3f-%.3f) | %.2f | %s |", t.Wall.Median, t.Wall.Min, t.Wall.Max, t.FloorRatio, bytesize.Format(t.WireBytes.Median))
				}
			}
			b.WriteString(cells)
		}
		for _, p := range peers {
			cell := ""
			for _, t := range c.Tools[1:] {
				if t.Name != p {
					continue
				}
				switch {
				case t.Skipped != "":
					cell = "skip"
				case !t.Measured():
					cell = "failed"
				default:
					cell = fmt.Sprintf("%.2f", t.SparsesyncRatio)
					if t.WrongResult != "" {
						cell += " (wrong)"
					}
				}
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
