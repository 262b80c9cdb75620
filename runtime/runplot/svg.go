package runplot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Layout of the picture, in SVG user units (pixels at 100%).
const (
	width       = 760
	left        = 64 // left margin: y tick labels and axis titles
	right       = 16
	titleH      = 40 // title above the loss panel
	lossH       = 230
	gapH        = 40 // between the panels: the loss panel's x tick labels
	workersH    = 110
	bottomH     = 44 // x tick labels and the x axis title
	captionLine = 18
	plotW       = width - left - right
	// maxPoints caps the points of one polyline: longer series keep, per
	// horizontal pixel, the first, lowest, highest and last point.
	maxPoints = 4 * plotW
)

// palette colours the runs in order (then repeats).
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"}

// SVG draws runs as one SVG document: training loss per step above,
// physical workers per step below, on one step axis; a dashed vertical line
// in the run's colour at each reallocation and a circle on the loss curve
// at each redone step; a legend, and under the picture how each run's
// digests compare with the first run's. The first run is drawn widest and
// each later one narrower on top, so curves that coincide stay visible.
// Each run is one <polyline class="loss"> and one <polyline
// class="workers">; marks are <line class="realloc"> and <circle
// class="redo">, all with data-run (the run's index) and the marks with
// data-step. Labels and names are escaped. Errors: no runs, a run without
// steps or with steps out of order, runs of different jobs (JobID).
func SVG(runs []Run) ([]byte, error) {
	if err := check(runs); err != nil {
		return nil, err
	}
	c := newCanvas(runs)
	c.frame(runs)
	for i, r := range runs {
		c.run(i, r)
	}
	c.legend(runs)
	c.caption(runs)
	c.b.WriteString("</svg>\n")
	return c.b.Bytes(), nil
}

// canvas holds the scales of one picture and the document being written.
type canvas struct {
	b                bytes.Buffer
	height           float64
	lossTop, lossBot float64 // panel bounds, y grows downwards
	wTop, wBot       float64
	maxStep          float64 // x axis 0..maxStep
	lossMax          float64 // loss axis 0..lossMax
	wMax             float64 // workers axis 0..wMax
	lossTicks        []float64
	stepTicks        []float64
	wTicks           []float64
}

func newCanvas(runs []Run) *canvas {
	c := &canvas{lossTop: titleH}
	c.lossBot = c.lossTop + lossH
	c.wTop = c.lossBot + gapH
	c.wBot = c.wTop + workersH
	c.height = c.wBot + bottomH + captionLine*float64(max(1, len(runs)-1)) + 8
	var maxStep int64
	var lossMax float64
	wMax := 1
	for _, r := range runs {
		maxStep = max(maxStep, r.Steps[len(r.Steps)-1].Step)
		wMax = max(wMax, r.LogicalWorkers)
		for _, s := range r.Steps {
			if finite(s.Loss) {
				lossMax = max(lossMax, s.Loss)
			}
			wMax = max(wMax, s.Workers)
		}
	}
	c.stepTicks, c.maxStep = ticks(float64(maxStep), 8)
	if lossMax <= 0 {
		lossMax = 1
	}
	c.lossTicks, c.lossMax = ticks(lossMax, 5)
	c.wTicks, c.wMax = ticks(float64(wMax), 4)
	// Integer ticks only on the workers axis.
	if c.wTicks[1]-c.wTicks[0] < 1 {
		c.wTicks, c.wMax = nil, float64(wMax)
		for w := 0; w <= wMax; w++ {
			c.wTicks = append(c.wTicks, float64(w))
		}
	}
	return c
}

// pad keeps a panel's top value this far below its frame, so that a line
// at the top stays visible.
const pad = 8

// The conversions round each product, so that no platform fuses it into a
// multiply-add and the coordinates (and the golden file) are the same on
// amd64 and arm64.
func (c *canvas) x(step float64) float64 { return left + float64(step/c.maxStep*plotW) }
func (c *canvas) yLoss(l float64) float64 {
	return c.lossBot - float64(l/c.lossMax*(c.lossBot-c.lossTop-pad))
}
func (c *canvas) yWorkers(w float64) float64 {
	return c.wBot - float64(w/c.wMax*(c.wBot-c.wTop-pad))
}

// num formats a coordinate with one decimal, the same on every platform.
func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// esc escapes s for SVG text and attribute values.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// tick formats a tick label: integers without decimals, else %g.
func tick(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// ticks returns about n round tick values from 0 covering hi (1, 2 or 5
// times a power of ten apart) and the axis end, the last tick; hi that is
// not a positive number counts as 1.
func ticks(hi float64, n int) ([]float64, float64) {
	if !(hi > 0) {
		hi = 1
	}
	raw := hi / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	stepV := 10 * p
	for _, m := range []float64{1, 2, 5} {
		if m*p >= raw {
			stepV = m * p
			break
		}
	}
	if !(stepV > 0) || math.IsInf(stepV, 0) {
		// hi so small (or large) that its tick spacing is not a
		// normal number: just the ends.
		return []float64{0, hi}, hi
	}
	var out []float64
	for i := 0; i <= 2*n+2; i++ {
		v := float64(i) * stepV
		out = append(out, v)
		if v >= hi*(1-1e-9) {
			return out, v
		}
	}
	return append(out, hi), hi
}

// frame writes the document head, the title, both panels' axes and grids.
func (c *canvas) frame(runs []Run) {
	fmt.Fprintf(&c.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%s" viewBox="0 0 %d %s" font-family="sans-serif" font-size="12">`+"\n",
		width, num(c.height), width, num(c.height))
	fmt.Fprintf(&c.b, `<rect width="100%%" height="100%%" fill="#fff"/>`+"\n")
	r0 := runs[0]
	fmt.Fprintf(&c.b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s: %s</text>`+"\n",
		left, esc(r0.JobName), esc(fmt.Sprintf("training loss and physical workers per step, %s", plural(r0.LogicalWorkers, "logical worker"))))
	c.panel(c.lossTop, c.lossBot, c.lossTicks, c.yLoss, "training loss")
	c.panel(c.wTop, c.wBot, c.wTicks, c.yWorkers, "physical workers")
	fmt.Fprintf(&c.b, `<text x="%s" y="%s" text-anchor="middle">step</text>`+"\n", num(left+plotW/2), num(c.wBot+36))
}

// panel writes one panel's frame, horizontal grid lines with their labels,
// vertical step grid lines with labels below, and the y axis title.
func (c *canvas) panel(top, bot float64, yt []float64, y func(float64) float64, title string) {
	fmt.Fprintf(&c.b, `<g class="axes" stroke="#ccc" stroke-width="1">`+"\n")
	for _, v := range yt {
		fmt.Fprintf(&c.b, `<line x1="%d" x2="%d" y1="%s" y2="%s"/>`+"\n", left, left+plotW, num(y(v)), num(y(v)))
	}
	for _, s := range c.stepTicks {
		fmt.Fprintf(&c.b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#eee"/>`+"\n", num(c.x(s)), num(c.x(s)), num(top), num(bot))
	}
	fmt.Fprintf(&c.b, `<rect x="%d" y="%s" width="%d" height="%s" fill="none" stroke="#888"/>`+"\n", left, num(top), plotW, num(bot-top))
	c.b.WriteString("</g>\n")
	fmt.Fprintf(&c.b, `<g class="labels" fill="#444">`+"\n")
	for _, v := range yt {
		fmt.Fprintf(&c.b, `<text x="%d" y="%s" text-anchor="end">%s</text>`+"\n", left-6, num(y(v)+4), tick(v))
	}
	for _, s := range c.stepTicks {
		fmt.Fprintf(&c.b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(c.x(s)), num(bot+16), tick(s))
	}
	mid := (top + bot) / 2
	fmt.Fprintf(&c.b, `<text transform="translate(18 %s) rotate(-90)" text-anchor="middle">%s</text>`+"\n", num(mid), title)
	c.b.WriteString("</g>\n")
}

// run writes run i: its loss and workers polylines, reallocation lines and
// redo circles.
func (c *canvas) run(i int, r Run) {
	col := palette[i%len(palette)]
	w, opacity := lineStyle(i)
	fmt.Fprintf(&c.b, `<g class="run" data-run="%d" data-label="%s">`+"\n", i, esc(r.Label))
	var loss [][2]float64
	for _, s := range r.Steps {
		if finite(s.Loss) {
			loss = append(loss, [2]float64{c.x(float64(s.Step)), c.yLoss(s.Loss)})
		}
	}
	fmt.Fprintf(&c.b, `<polyline class="loss" data-run="%d" fill="none" stroke="%s" stroke-width="%s" stroke-opacity="%s" stroke-linejoin="round" points="%s"/>`+"\n",
		i, col, num(w), opacity, points(decimate(loss)))
	fmt.Fprintf(&c.b, `<polyline class="workers" data-run="%d" fill="none" stroke="%s" stroke-width="%s" stroke-opacity="%s" points="%s"/>`+"\n",
		i, col, num(w), opacity, points(c.workerSteps(r)))
	for _, ra := range r.Reallocations() {
		x := num(c.x(float64(ra.Step)))
		fmt.Fprintf(&c.b, `<line class="realloc" data-run="%d" data-step="%d" x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-dasharray="4 3" stroke-opacity="0.7"><title>%s</title></line>`+"\n",
			i, ra.Step, x, x, num(c.lossTop), num(c.wBot), col,
			esc(fmt.Sprintf("%s: after step %d, %d → %d workers (%s)", r.Label, ra.Step, ra.From, ra.To, ra.Reason)))
	}
	for _, s := range r.Redone() {
		y := c.lossTop + 8
		if finite(s.Loss) {
			y = c.yLoss(s.Loss)
		}
		fmt.Fprintf(&c.b, `<circle class="redo" data-run="%d" data-step="%d" cx="%s" cy="%s" r="5" fill="none" stroke="#000" stroke-width="1.5"><title>%s</title></circle>`+"\n",
			i, s.Step, num(c.x(float64(s.Step))), num(y), esc(fmt.Sprintf("%s: step %d redone (%s)", r.Label, s.Step, plural(max(1, s.Redos), "extra execution"))))
	}
	c.b.WriteString("</g>\n")
}

// lineStyle returns the stroke width and opacity of run i's lines: the
// first run wide and translucent, visible around the later ones, which are
// narrow and on top.
func lineStyle(i int) (width float64, opacity string) {
	if i == 0 {
		return 6, "0.4"
	}
	return 1.6, "1"
}

// workerSteps returns the corners of r's workers step function: step s
// ran on s.Workers workers over x from s.Step-1 to s.Step.
func (c *canvas) workerSteps(r Run) [][2]float64 {
	var pts [][2]float64
	prev := -1
	for _, s := range r.Steps {
		y := c.yWorkers(float64(s.Workers))
		if s.Workers != prev {
			if prev >= 0 {
				pts = append(pts, [2]float64{c.x(float64(s.Step - 1)), c.yWorkers(float64(prev))})
			}
			pts = append(pts, [2]float64{c.x(float64(s.Step - 1)), y})
			prev = s.Workers
		}
	}
	last := r.Steps[len(r.Steps)-1]
	return append(pts, [2]float64{c.x(float64(last.Step)), c.yWorkers(float64(last.Workers))})
}

// decimate keeps at most about maxPoints of pts (in x order): per pixel
// column the first, lowest, highest and last point, in x order.
func decimate(pts [][2]float64) [][2]float64 {
	if len(pts) <= maxPoints {
		return pts
	}
	var out [][2]float64
	for i := 0; i < len(pts); {
		col := math.Floor(pts[i][0])
		j := i
		lo, hi := i, i
		for j < len(pts) && math.Floor(pts[j][0]) == col {
			if pts[j][1] < pts[lo][1] {
				lo = j
			}
			if pts[j][1] > pts[hi][1] {
				hi = j
			}
			j++
		}
		keep := []int{i, min(lo, hi), max(lo, hi), j - 1}
		last := -1
		for _, k := range keep {
			if k != last {
				out = append(out, pts[k])
				last = k
			}
		}
		i = j
	}
	return out
}

// points formats pts as an SVG points list.
func points(pts [][2]float64) string {
	var b strings.Builder
	for i, p := range pts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(num(p[0]))
		b.WriteByte(',')
		b.WriteString(num(p[1]))
	}
	return b.String()
}

// legend writes one entry per run (its colour, label, reallocations and
// redone steps) and one per kind of mark, at the loss panel's top right.
func (c *canvas) legend(runs []Run) {
	type entry struct{ swatch, text string }
	var entries []entry
	realloc, redo := false, false
	for i, r := range runs {
		col := palette[i%len(palette)]
		n, m := len(r.Reallocations()), len(r.Redone())
		realloc = realloc || n > 0
		redo = redo || m > 0
		text := fmt.Sprintf("%s: %s, %s", r.Label, plural(n, "reallocation"), plural(m, "redone step"))
		w, opacity := lineStyle(i)
		entries = append(entries, entry{fmt.Sprintf(`<line x1="0" x2="22" y1="0" y2="0" stroke="%s" stroke-width="%s" stroke-opacity="%s"/>`, col, num(w), opacity), text})
	}
	if realloc {
		entries = append(entries, entry{`<line x1="11" x2="11" y1="-7" y2="7" stroke="#555" stroke-dasharray="4 3"/>`, "reallocation (at the step boundary)"})
	}
	if redo {
		entries = append(entries, entry{`<circle cx="11" cy="0" r="5" fill="none" stroke="#000" stroke-width="1.5"/>`, "redone step"})
	}
	longest := 0
	for _, e := range entries {
		longest = max(longest, len([]rune(e.text)))
	}
	wBox := 40 + float64(longest)*6.6
	hBox := float64(len(entries))*18 + 8
	x0, y0 := c.legendCorner(runs, wBox, hBox)
	fmt.Fprintf(&c.b, `<g class="legend"><rect x="%s" y="%s" width="%s" height="%s" fill="#fff" fill-opacity="0.85" stroke="#ccc"/>`+"\n",
		num(x0), num(y0), num(wBox), num(hBox))
	for k, e := range entries {
		y := y0 + 16 + float64(k)*18
		fmt.Fprintf(&c.b, `<g transform="translate(%s %s)">%s<text x="30" y="4">%s</text></g>`+"\n", num(x0+8), num(y), e.swatch, esc(e.text))
	}
	c.b.WriteString("</g>\n")
}

// legendCorner returns the top left of a w×h legend box inside the loss
// panel: the corner (top right, bottom left, top left, bottom right, in
// that order of preference) whose box covers the fewest drawn loss points,
// so that a short run's curves and redo marks stay visible.
func (c *canvas) legendCorner(runs []Run, w, h float64) (float64, float64) {
	right, leftX := float64(left+plotW)-w-8, float64(left)+8
	top, bottom := c.lossTop+10, c.lossBot-h-10
	corners := [][2]float64{{right, top}, {leftX, bottom}, {leftX, top}, {right, bottom}}
	best, bestN := corners[0], -1
	for _, k := range corners {
		n := 0
		for _, r := range runs {
			for _, st := range r.Steps {
				if math.IsNaN(st.Loss) {
					continue
				}
				x, y := c.x(float64(st.Step)), c.yLoss(st.Loss)
				if x >= k[0]-6 && x <= k[0]+w+6 && y >= k[1]-6 && y <= k[1]+h+6 {
					n++
				}
			}
		}
		if bestN < 0 || n < bestN {
			best, bestN = k, n
		}
	}
	return best[0], best[1]
}

// caption writes, under the picture, how each later run's digests compare
// with the first run's (steps either run left unhashed are not compared),
// or the single run's last hashed step and its digest.
func (c *canvas) caption(runs []Run) {
	y := c.wBot + bottomH + 8
	line := func(s string) {
		fmt.Fprintf(&c.b, `<text class="caption" x="%d" y="%s">%s</text>`+"\n", left, num(y), esc(s))
		y += captionLine
	}
	if len(runs) == 1 {
		if last, ok := runs[0].lastHashed(); ok {
			line(fmt.Sprintf("%s: step %d, parameters %.23s…", runs[0].Label, last.Step, last.Digest))
		}
		return
	}
	for _, r := range runs[1:] {
		ag := Compare(runs[0], r)
		skipped := ""
		if ag.Unhashed > 0 {
			skipped = fmt.Sprintf("; %s unhashed in one run or both, not compared", plural(ag.Unhashed, "common step"))
		}
		switch {
		case ag.Common == 0:
			line(fmt.Sprintf("%s and %s share no hashed step: nothing to compare%s", runs[0].Label, r.Label, skipped))
		case ag.Diverged >= 0:
			line(fmt.Sprintf("%s DIVERGES from %s at step %d (%s compared%s)", r.Label, runs[0].Label, ag.Diverged, plural(ag.Common, "common step"), skipped))
		default:
			line(fmt.Sprintf("%s and %s: bit-identical parameters after each of the %s (last %d%s)", runs[0].Label, r.Label, plural(ag.Common, "common step"), ag.Last, skipped))
		}
	}
}
