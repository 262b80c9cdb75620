package simulator

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Plot writes the GPU allocation over time (allocated and lent GPUs, hours
// on the x axis) to path as a step chart: each sample's value holds until
// the next sample, as the series records it. The extension, .svg or .png,
// picks the format.
func Plot(path string, res Result) error {
	if len(res.Series) == 0 {
		return fmt.Errorf("no samples to plot")
	}
	end := res.Series[len(res.Series)-1].T
	alloc, lent := stepPoints(Downsample(res.Series, 2000), end)
	p := plot.New()
	p.Title.Text = fmt.Sprintf("GPU allocation, %s policy (%d GPUs)", res.Policy, res.TotalGPUs)
	p.X.Label.Text = "time since the first submission (h)"
	p.Y.Label.Text = "GPUs"
	la, err := plotter.NewLine(alloc)
	if err != nil {
		return fmt.Errorf("plotting allocation: %w", err)
	}
	la.Color = color.RGBA{B: 200, A: 255}
	ll, err := plotter.NewLine(lent)
	if err != nil {
		return fmt.Errorf("plotting lent GPUs: %w", err)
	}
	ll.Color = color.RGBA{R: 220, G: 120, A: 255}
	p.Add(la, ll)
	p.Legend.Add("allocated", la)
	p.Legend.Add("lent to elastic jobs", ll)
	p.Legend.Top = true
	if err := p.Save(8*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("saving %s: %w", path, err)
	}
	return nil
}

// stepPoints returns the allocated and lent GPU counts of series as the
// corners of a step chart, x in hours since series[0].T: each sample's
// value is drawn flat until the next sample's time (then straight up or
// down), and the last one until end (seconds, as Sample.T; ignored when
// not after the last sample). A line through the samples alone would draw
// a slow ramp where the allocation stayed flat and then changed at once.
func stepPoints(series []Sample, end int64) (alloc, lent plotter.XYs) {
	if len(series) == 0 {
		return nil, nil
	}
	t0 := series[0].T
	hours := func(t int64) float64 { return float64(t-t0) / 3600 }
	alloc = make(plotter.XYs, 0, 2*len(series))
	lent = make(plotter.XYs, 0, 2*len(series))
	for i, v := range series {
		x := hours(v.T)
		alloc = append(alloc, plotter.XY{X: x, Y: float64(v.Allocated)})
		lent = append(lent, plotter.XY{X: x, Y: float64(v.Lent)})
		next := end
		if i+1 < len(series) {
			next = series[i+1].T
		}
		if next > v.T {
			alloc = append(alloc, plotter.XY{X: hours(next), Y: float64(v.Allocated)})
			lent = append(lent, plotter.XY{X: hours(next), Y: float64(v.Lent)})
		}
	}
	return alloc, lent
}
