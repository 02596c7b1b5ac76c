package ui

import (
	"fmt"
	"html/template"
	"strings"
	"time"
)

// progressBar draws done of total as an SVG bar; the live script resizes
// it through its data-bar attribute.
func progressBar(key string, done, total int) template.HTML {
	w := 0.0
	if total > 0 {
		w = 100 * float64(done) / float64(total)
	}
	label := fmt.Sprintf("%d of %d updated", done, total)
	return template.HTML(fmt.Sprintf(`<svg class="bar" viewBox="0 0 100 8" preserveAspectRatio="none" role="img" aria-label="%s">`+
		`<rect class="bar-bg" width="100" height="8"></rect><rect class="bar-fg" data-bar="%s" width="%.1f" height="8"></rect></svg>`,
		template.HTMLEscapeString(label), template.HTMLEscapeString(key), w))
}

// Plot geometry, in SVG user units.
const (
	plotW, plotH         = 600, 140
	plotLeft, plotBottom = 40, 20
)

// progressPlot draws updated (and failed) nodes over time as SVG lines,
// or says there are too few samples yet.
func progressPlot(pts []progressPoint) template.HTML {
	if len(pts) < 2 {
		return template.HTML(`<p class="muted">Progress plot: not enough samples yet (one is taken every sample interval).</p>`)
	}
	top := 1
	for _, p := range pts {
		top = max(top, p.Total, p.Updated)
	}
	t0, t1 := pts[0].At, pts[len(pts)-1].At
	span := max(t1.Sub(t0), time.Second)
	x := func(t time.Time) float64 {
		return plotLeft + float64(plotW-plotLeft-10)*float64(t.Sub(t0))/float64(span)
	}
	y := func(v int) float64 { return 10 + float64(plotH-plotBottom-10)*(1-float64(v)/float64(top)) }
	line := func(val func(progressPoint) int) string {
		var b strings.Builder
		for i, p := range pts {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", x(p.At), y(val(p)))
		}
		return b.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="plot" viewBox="0 0 %d %d" role="img" aria-label="rollout progress: %d of %d updated at the last sample">`,
		plotW, plotH, pts[len(pts)-1].Updated, pts[len(pts)-1].Total)
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%.1f" x2="%d" y2="%.1f"></line>`, plotLeft, y(0), plotW-10, y(0))
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%.1f" x2="%d" y2="%.1f"></line>`, plotLeft, y(top), plotLeft, y(0))
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%.1f">%d</text><text class="tick" x="%d" y="%.1f">0</text>`,
		plotLeft-6, y(top)+4, top, plotLeft-6, y(0)+4)
	fmt.Fprintf(&b, `<text class="tick start" x="%d" y="%d">%s</text><text class="tick end" x="%d" y="%d">%s</text>`,
		plotLeft, plotH-4, t0.UTC().Format("15:04:05"), plotW-10, plotH-4, t1.UTC().Format("15:04:05"))
	fmt.Fprintf(&b, `<polyline class="line-total" points="%s"></polyline>`, line(func(p progressPoint) int { return p.Total }))
	fmt.Fprintf(&b, `<polyline class="line-updated" points="%s"></polyline>`, line(func(p progressPoint) int { return p.Updated }))
	fmt.Fprintf(&b, `<polyline class="line-failed" points="%s"></polyline>`, line(func(p progressPoint) int { return p.Failed }))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
