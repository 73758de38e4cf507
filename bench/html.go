package bench

import (
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/sparsesync/sparsesync/internal/bytesize"
)

// Colours of the charts (the screenshot test looks for the first two).
const (
	colorSparsesync = "#1f5fd1"
	colorPeer       = "#e8772e"
	colorFloor      = "#c0142b"
	colorWritten    = "#2e9e4f"
)

// WriteHTML writes the report as one self-contained HTML page (inline CSS
// and SVG, no scripts, no external assets): per case, the wall time of
// every tool as a bar at its median with a min-max whisker and the floor
// as a line, the bytes each tool wrote to the target device, a table of
// every figure, the skipped tools with their reasons and, with profiles,
// where sparsesync's CPU time went.
func (r *Report) WriteHTML(w io.Writer) error {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>sparsesync benchmark</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#111;background:#fff}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:28px 0 4px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}.note{color:#555}.skip{color:#8a4b00}.err{color:#b00020}
table.prof td:nth-child(3n+1){text-align:left;max-width:360px;overflow-wrap:anywhere}
svg text{font:12px system-ui,sans-serif}
</style></head><body>
`)
	fmt.Fprintf(&b, "<h1>sparsesync benchmark</h1>\n<p class=note>%s, %s, %d CPUs, %s RAM, %s; load average %.1f at the start, %.1f at the end; %d rounds per case, tools interleaved (order rotated each round)%s. Bars are medians, whiskers min to max, the red line is the physical floor. Ratios are medians of per-round ratios.</p>\n",
		esc(r.Host.Hostname), esc(r.Host.Kernel), r.Host.CPUs, bytesize.Format(r.Host.MemBytes), esc(r.Host.Go),
		r.Host.Load1Start, r.Host.Load1End, r.Runs, coldNote(r.Host))
	for i := range r.Cases {
		writeCaseHTML(&b, &r.Cases[i], i)
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func esc(s string) string { return html.EscapeString(s) }

func writeCaseHTML(b *strings.Builder, c *Case, idx int) {
	fmt.Fprintf(b, "<h2 id=case%d>%s &middot; %s &middot; %s (%s)</h2>\n", idx, esc(c.Workload), esc(c.Scenario), esc(c.Place), esc(c.FSType))
	fmt.Fprintf(b, "<p class=note>source %s, %s of data", bytesize.Format(c.Size), bytesize.Format(c.DataBytes))
	if c.ChangedBytes > 0 {
		fmt.Fprintf(b, ", %s changed since the target's version", bytesize.Format(c.ChangedBytes))
	}
	b.WriteString("</p>\n")
	var measured []Tool
	for _, t := range c.Tools {
		if t.Measured() {
			measured = append(measured, t)
		}
	}
	timeChart(b, c, measured)
	if c.DeviceStats {
		writtenChart(b, c, measured)
	}
	b.WriteString("<table><tr><th>tool</th><th>median s</th><th>min s</th><th>max s</th><th>x floor</th><th>sparsesync / tool</th><th>user+sys s</th><th>busy CPU s (sparsesync / tool)</th><th>peak RSS</th><th>written to device</th><th>on the wire</th></tr>\n")
	rows := append([]Tool{c.Floor}, c.Tools...)
	for _, t := range rows {
		if !t.Measured() {
			continue
		}
		ratio := ""
		if t.SparsesyncRatio > 0 {
			ratio = fmt.Sprintf("%.2f", t.SparsesyncRatio)
		}
		floor := ""
		if t.FloorRatio > 0 {
			floor = fmt.Sprintf("%.2f", t.FloorRatio)
		}
		written := "n/a"
		if c.DeviceStats && t.DeviceWritten.N > 0 {
			written = bytesize.Format(t.DeviceWritten.Median)
		}
		rss := "n/a"
		if t.PeakRSS.Median > 0 {
			rss = bytesize.Format(t.PeakRSS.Median)
		}
		wire := ""
		if t.WireBytes.N > 0 {
			wire = bytesize.Format(t.WireBytes.Median)
		}
		if t.RatioBase != "" && ratio != "" {
			ratio += " (" + esc(t.RatioBase) + ")"
		}
		busy := ""
		if t.BusyCPU.N > 0 {
			busy = fmt.Sprintf("%.2f", t.BusyCPU.Median)
		}
		if t.BusyCPURatio > 0 {
			busy += fmt.Sprintf(" (%.2f)", t.BusyCPURatio)
		}
		fmt.Fprintf(b, "<tr><td>%s</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%s</td><td>%s</td><td>%.3f</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
			esc(t.Name), t.Wall.Median, t.Wall.Min, t.Wall.Max, floor, ratio, t.User.Median+t.Sys.Median, busy, rss, written, wire)
	}
	b.WriteString("</table>\n")
	for _, t := range rows {
		if t.Skipped != "" {
			fmt.Fprintf(b, "<p class=skip>%s skipped: %s</p>\n", esc(t.Name), esc(t.Skipped))
		}
		if t.Error != "" {
			fmt.Fprintf(b, "<p class=err>%s: %s</p>\n", esc(t.Name), esc(t.Error))
		}
		if t.WrongResult != "" {
			fmt.Fprintf(b, "<p class=err>%s left a wrong result: %s</p>\n", esc(t.Name), esc(t.WrongResult))
		}
	}
	if p := c.Tools[0].Profile; p != nil {
		fmt.Fprintf(b, "<p class=note>sparsesync CPU profile: %.2f s sampled over %d runs</p>\n<table class=prof><tr><th>top by flat time</th><th>s</th><th>%%</th><th>top by cumulative time</th><th>s</th><th>%%</th></tr>\n", p.Total, len(p.Files))
		for i := range max(len(p.Flat), len(p.Cum)) {
			b.WriteString("<tr>")
			for _, list := range [][]FuncTime{p.Flat, p.Cum} {
				if i < len(list) {
					fmt.Fprintf(b, "<td>%s</td><td>%.2f</td><td>%.0f</td>", esc(list[i].Func), list[i].Seconds, 100*list[i].Share)
				} else {
					b.WriteString("<td></td><td></td><td></td>")
				}
			}
			b.WriteString("</tr>\n")
		}
		b.WriteString("</table>\n")
	}
}

const (
	chartW  = 760
	labelW  = 110
	barH    = 18
	barGap  = 8
	chartTM = 22 // top margin: the axis caption
)

// barChart opens the svg of a chart of n bars (class, aria label and
// title), scaled so that top fits with a tenth to spare and margin pixels
// right of the plot for the value labels. It returns the chart's height and
// the x of a value.
func barChart(b *strings.Builder, class, aria, title string, n int, top float64, margin int) (int, func(float64) float64) {
	if top <= 0 {
		top = 1
	}
	top *= 1.1
	h := chartTM + n*(barH+barGap) + 10
	plot := float64(chartW - labelW - margin)
	x := func(v float64) float64 { return labelW + v/top*plot }
	fmt.Fprintf(b, `<svg class=%s width="%d" height="%d" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="%s">`+"\n", class, chartW, h, chartW, h, aria)
	fmt.Fprintf(b, `<text x="%d" y="14">%s</text>`+"\n", labelW, title)
	return h, x
}

// barRow draws the i-th bar, named name, from the plot's left edge to x,
// and returns the y of its middle.
func barRow(b *strings.Builder, i int, name string, x float64, col string) float64 {
	y := chartTM + i*(barH+barGap)
	cy := float64(y) + barH/2
	fmt.Fprintf(b, `<text x="%d" y="%.0f" text-anchor="end">%s</text>`, labelW-6, cy+4, esc(name))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`, labelW, y, max(x-labelW, 1), barH, col)
	return cy
}

// timeChart draws one bar per measured tool at its median wall time, a
// whisker from its minimum to its maximum, and the floor's median as a
// vertical red line.
func timeChart(b *strings.Builder, c *Case, tools []Tool) {
	if len(tools) == 0 {
		return
	}
	top := c.Floor.Wall.Max
	for _, t := range tools {
		top = max(top, t.Wall.Max)
	}
	h, x := barChart(b, "time", "wall time", "wall time, seconds (median; whisker min-max; red: floor)", len(tools), top, 70)
	for i, t := range tools {
		col := colorPeer
		if t.Name == "sparsesync" || t.Name == SparsesyncNet {
			col = colorSparsesync
		}
		cy := barRow(b, i, t.Name, x(t.Wall.Median), col)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000" stroke-width="1.5"/>`, x(t.Wall.Min), cy, x(t.Wall.Max), cy)
		for _, v := range []float64{t.Wall.Min, t.Wall.Max} {
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000" stroke-width="1.5"/>`, x(v), cy-5, x(v), cy+5)
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f">%.3g s</text>`+"\n", x(t.Wall.Max)+6, cy+4, t.Wall.Median)
	}
	if c.Floor.Measured() {
		fx := x(c.Floor.Wall.Median)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="6 3"/>`, fx, chartTM-4, fx, h-6, colorFloor)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" fill="%s">floor %.3g s</text>`+"\n", fx+4, h-1, colorFloor, c.Floor.Wall.Median)
	}
	b.WriteString("</svg>\n")
}

// writtenChart draws the median bytes each tool wrote to the target's
// block device, with the bytes a sync must write as a line.
func writtenChart(b *strings.Builder, c *Case, tools []Tool) {
	if len(tools) == 0 {
		return
	}
	need := c.DataBytes
	if c.ChangedBytes > 0 {
		need = c.ChangedBytes
	}
	top := float64(need)
	for _, t := range tools {
		top = max(top, float64(t.DeviceWritten.Median))
	}
	h, x := barChart(b, "written", "bytes written", "bytes written to the target device (median; line: bytes that had to change)", len(tools), top, 90)
	for i, t := range tools {
		cy := barRow(b, i, t.Name, x(float64(t.DeviceWritten.Median)), colorWritten)
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f">%s</text>`+"\n", x(float64(t.DeviceWritten.Median))+6, cy+4, bytesize.Format(t.DeviceWritten.Median))
	}
	nx := x(float64(need))
	fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="6 3"/>`+"\n", nx, chartTM-4, nx, h-6, colorFloor)
	b.WriteString("</svg>\n")
}
