package ui

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/telemetry"
	"github.com/edgeset/edgeset/schema"
)

// telemetryView is a node's last resource report and its history as
// small plots, for the Node view.
type telemetryView struct {
	Received string
	Load     string
	Memory   string
	Disks    []keyValue
	Temp     string
	Uptime   string
	Usage    []schema.InstanceUsage
	Plots    []template.HTML
}

// telemetryViewOf renders tm; nil when the node never reported.
func telemetryViewOf(tm *telemetry.Node, now time.Time) *telemetryView {
	if tm == nil {
		return nil
	}
	m := tm.Latest
	v := &telemetryView{Received: ago(&tm.Received, now),
		Load:   fmt.Sprintf("%.2f (%d CPUs)", m.Load1, m.CPUs),
		Memory: fmt.Sprintf("%s available of %s", telemetry.Bytes(m.MemoryAvailableBytes), telemetry.Bytes(m.MemoryTotalBytes)),
		Temp:   "not reported", Uptime: (time.Duration(m.UptimeSeconds) * time.Second).String(), Usage: m.Instances}
	if m.TemperatureCelsius != nil {
		v.Temp = fmt.Sprintf("%.1f °C", *m.TemperatureCelsius)
	}
	for _, d := range m.Disks {
		v.Disks = append(v.Disks, keyValue{d.Name, fmt.Sprintf("%s free of %s (%s)", telemetry.Bytes(d.FreeBytes), telemetry.Bytes(d.SizeBytes), d.Path)})
	}
	h := tm.History
	at := make([]time.Time, len(h))
	for i, p := range h {
		at[i] = p.Time
	}
	series := func(val func(telemetry.Point) (float64, bool)) []float64 {
		out := make([]float64, len(h))
		for i, p := range h {
			x, ok := val(p)
			if !ok {
				x = math.NaN()
			}
			out[i] = x
		}
		return out
	}
	const gib = 1 << 30
	v.Plots = []template.HTML{
		seriesPlot("load average", "", at, series(func(p telemetry.Point) (float64, bool) { return p.Load1, true })),
		seriesPlot("memory available", "GiB", at, series(func(p telemetry.Point) (float64, bool) {
			return float64(p.MemoryAvailableBytes) / gib, true
		})),
		seriesPlot("data disk free", "GiB", at, series(func(p telemetry.Point) (float64, bool) {
			if p.DataFreeBytes == nil {
				return 0, false
			}
			return float64(*p.DataFreeBytes) / gib, true
		})),
		seriesPlot("temperature", "°C", at, series(func(p telemetry.Point) (float64, bool) {
			if p.TemperatureCelsius == nil {
				return 0, false
			}
			return *p.TemperatureCelsius, true
		})),
	}
	return v
}

// Dimensions of a telemetry plot, in SVG user units.
const (
	sparkW, sparkH = 280, 90
	sparkLeft      = 44
)

// seriesPlot draws one figure over time as an SVG line; points without a
// value (NaN) are left out. Fewer than two points, or none with a value,
// say so instead.
func seriesPlot(name, unit string, at []time.Time, vals []float64) template.HTML {
	var idx []int
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, v := range vals {
		if math.IsNaN(v) {
			continue
		}
		idx = append(idx, i)
		lo, hi = min(lo, v), max(hi, v)
	}
	label := name
	if unit != "" {
		label += " (" + unit + ")"
	}
	if len(idx) < 2 {
		return template.HTML(`<p class="muted">` + template.HTMLEscapeString(label) + `: not enough reports yet.</p>`)
	}
	if hi == lo {
		lo, hi = lo-1, hi+1
	}
	lo = min(lo, 0)
	t0, t1 := at[idx[0]], at[idx[len(idx)-1]]
	span := max(t1.Sub(t0), time.Second)
	x := func(t time.Time) float64 {
		return sparkLeft + float64(sparkW-sparkLeft-6)*float64(t.Sub(t0))/float64(span)
	}
	y := func(v float64) float64 { return 8 + float64(sparkH-26)*(1-(v-lo)/(hi-lo)) }
	var pts strings.Builder
	for k, i := range idx {
		if k > 0 {
			pts.WriteByte(' ')
		}
		fmt.Fprintf(&pts, "%.1f,%.1f", x(at[i]), y(vals[i]))
	}
	last := vals[idx[len(idx)-1]]
	var b strings.Builder
	fmt.Fprintf(&b, `<figure class="spark"><figcaption>%s: %.2f</figcaption>`, template.HTMLEscapeString(label), last)
	fmt.Fprintf(&b, `<svg class="plot" viewBox="0 0 %d %d" role="img" aria-label="%s over %d reports, last %.2f">`,
		sparkW, sparkH, template.HTMLEscapeString(label), len(idx), last)
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%.1f" x2="%d" y2="%.1f"></line>`, sparkLeft, y(lo), sparkW-6, y(lo))
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%.1f">%.3g</text><text class="tick" x="%d" y="%.1f">%.3g</text>`,
		sparkLeft-4, y(hi)+4, hi, sparkLeft-4, y(lo)+4, lo)
	fmt.Fprintf(&b, `<text class="tick start" x="%d" y="%d">%s</text><text class="tick end" x="%d" y="%d">%s</text>`,
		sparkLeft, sparkH-4, t0.UTC().Format("15:04"), sparkW-6, sparkH-4, t1.UTC().Format("15:04"))
	fmt.Fprintf(&b, `<polyline class="line-updated" points="%s"></polyline></svg></figure>`, pts.String())
	return template.HTML(b.String())
}
