package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

var colors = map[string]string{
	VarAuto:      "#444444",
	VarSnowflake: "#1f77b4",
	VarChain:     "#2ca02c",
	VarFleet:     "#17becf",
	VarUUIDv4:    "#d62728",
	VarUUIDv7:    "#ff7f0e",
	VarIDUUIDv7:  "#9467bd",
}

// Chart draws one server's median rows/s per tenth against the rows in the
// table (the middle of each tenth) as an SVG line chart.
func Chart(rep *Report, s *ServerReport) string {
	const (
		w, h                     = 960, 500
		left, right, top, bottom = 80, 275, 50, 60
	)
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	rows := float64(rep.Config.Rows)
	ymax := 0.0
	for _, v := range s.Variants {
		for _, r := range v.Median.RowsPerS {
			ymax = max(ymax, r)
		}
	}
	ystep := niceStep(ymax / 5)
	if ystep <= 0 {
		ystep = 1
	}
	ytop := math.Ceil(ymax/ystep) * ystep
	if ytop == 0 {
		ytop = ystep
	}
	xstep := niceStep(rows / 5)
	px := func(x float64) float64 { return float64(left) + x/rows*pw }
	py := func(y float64) float64 { return float64(top) + ph - y/ytop*ph }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	title := fmt.Sprintf("%s %s: inserted rows/s against rows in the table", s.Name, shortVersion(s.Version))
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	sub := fmt.Sprintf("GORM CreateInBatches of %s rows; each point: one tenth of %s rows, median of %d interleaved reps; buffer pool %s",
		thousands(int64(rep.Config.Batch)), thousands(rep.Config.Rows), rep.Config.Reps, bytesShort(s.BufferPool))
	if idx := rep.Config.Index; idx != "" && idx != "account_id" {
		sub += "; secondary index on " + idx
	}
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555" font-size="11">%s</text>`+"\n", left, html.EscapeString(sub))
	// Grid and axes.
	for y := 0.0; y <= ytop+ystep/2; y += ystep {
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", left, float64(left)+pw, py(y), py(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dy="4">%s</text>`+"\n", left-6, py(y), thousands(int64(y)))
	}
	for x := 0.0; x <= rows+xstep/2; x += xstep {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="#e5e5e5"/>`+"\n", px(x), px(x), top, float64(top)+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(x), float64(top)+ph+16, thousands(int64(x)))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">rows in the table</text>`+"\n", float64(left)+pw/2, h-18)
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">rows/s</text>`+"\n", float64(top)+ph/2)
	// Lines.
	for i, v := range s.Variants {
		color := colors[v.Name]
		var pts []string
		for k, r := range v.Median.RowsPerS {
			if r <= 0 {
				continue
			}
			x := rows * (float64(k) + 0.5) / Tenths
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(x), py(r)))
		}
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(pts, " "))
			for _, p := range pts {
				xy := strings.Split(p, ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], color)
			}
		}
		ly := top + 10 + i*20
		lx := w - right + 15
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", lx, lx+22, ly, ly, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dy="4">%s</text>`+"\n", lx+28, ly, html.EscapeString(legendName(v.Name, rep.Config.Fleet)))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func legendName(v string, fleet int) string {
	switch v {
	case VarAuto:
		return "AUTO_INCREMENT/BIGSERIAL"
	case VarSnowflake:
		return "idforge snowflake"
	case VarChain:
		return "idforge chain"
	case VarFleet:
		return fmt.Sprintf("snowflake ×%d at once", fleet)
	case VarUUIDv4:
		return "UUIDv4"
	case VarUUIDv7:
		return "UUIDv7"
	case VarIDUUIDv7:
		return "idforge UUIDv7"
	}
	return v
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func bytesShort(n int64) string {
	if n <= 0 {
		return "?"
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

func shortVersion(v string) string {
	if i := strings.IndexAny(v, " -"); i > 0 && strings.Contains(v, "MariaDB") {
		return v[:i]
	}
	if i := strings.IndexByte(v, ' '); i > 0 {
		return v[:i]
	}
	return v
}

// Table renders one server's medians as a Markdown table.
func Table(s *ServerReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s %s (medians)\n\n", s.Name, s.Version)
	b.WriteString("| variant | runs | rows/s overall | rows/s 1st tenth | rows/s last tenth | primary MiB | secondary MiB | buffer-pool reads | page splits |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, v := range s.Variants {
		m := v.Median
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %.1f | %.1f | %s | %s |\n", v.Name, m.Runs,
			thousands(int64(m.Overall)), thousands(int64(m.RowsPerS[0])), thousands(int64(m.RowsPerS[Tenths-1])),
			m.Primary/(1<<20), m.Secondary/(1<<20), optf(m.BufferPoolReads), optf(m.PageSplits))
	}
	b.WriteString("\n| check | value | target | pass | note |\n|---|---|---|---|---|\n")
	for _, c := range s.Checks {
		fmt.Fprintf(&b, "| %s | %.3f | %s | %v | %s |\n", c.What, c.Value, c.Target, c.Pass, c.Note)
	}
	return b.String()
}

func optf(p *float64) string {
	if p == nil {
		return "–"
	}
	return thousands(int64(*p))
}
