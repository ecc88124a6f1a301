package dashboard

import (
	"fmt"
	"html/template"
	"strings"
	"time"
)

// Chart geometry, in SVG user units.
const (
	padL, padB = 44, 22
	padT, padR = 8, 8
)

// Chart sizes: the page's main chart and a route's small one.
const (
	bigW, bigH     = 720, 200
	smallW, smallH = 360, 110
)

// chartSVG draws t as stacked bars, one per minute, rendered on the
// server (docs/dashboard.md says why), with the element id given. Every
// text in it is a number, a fixed label or the id (a constant or
// routeChartID's), so the markup needs no escaping.
func chartSVG(t Throughput, id string, chartW, chartH int) template.HTML {
	maxY := 0
	for i := range 60 {
		sum := 0
		for o := range t.Counts {
			sum += t.Counts[o][i]
		}
		maxY = max(maxY, sum)
	}
	top := niceCeil(maxY)
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	barW := plotW / 60
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="%s" class="chart" viewBox="0 0 %d %d" role="img" aria-label="commands per minute by outcome, last hour, peak %d">`, id, chartW, chartH, maxY)
	// Grid and y labels: 0, half, top.
	for _, v := range []int{0, top / 2, top} {
		y := float64(padT) + plotH - plotH*float64(v)/float64(top)
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`, padL, chartW-padR, y, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" font-size="11" fill="#555">%d</text>`, padL-6, y+4, v)
	}
	for i := range 60 {
		x := float64(padL) + float64(i)*barW
		base := float64(padT) + plotH
		for o := range t.Counts {
			n := t.Counts[o][i]
			if n == 0 {
				continue
			}
			h := plotH * float64(n) / float64(top)
			base -= h
			fmt.Fprintf(&b, `<rect class="bar %s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %d</title></rect>`,
				Outcomes[o].Label, x+0.5, base, barW-1, h, Outcomes[o].Color, t.Start.Add(time.Duration(i)*time.Minute).UTC().Format("15:04"), Outcomes[o].Label, n)
		}
	}
	// x labels every 15 minutes.
	for i := 0; i <= 60; i += 15 {
		x, anchor := float64(padL)+float64(i)*barW, "middle"
		if i == 60 { // the last label ends at the plot's edge
			anchor = "end"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="%s" font-size="11" fill="#555">%s</text>`,
			x, chartH-6, anchor, t.Start.Add(time.Duration(i)*time.Minute).UTC().Format("15:04"))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // numbers and fixed labels only
}

// niceCeil rounds n up to 1, 2 or 5 times a power of ten (at least 2, so
// the half line is a whole number).
func niceCeil(n int) int {
	if n <= 2 {
		return 2
	}
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*p >= n {
				return m * p
			}
		}
	}
}
