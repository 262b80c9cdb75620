package simulator

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Plot writes the GPU allocation over time (allocated and lent GPUs, hours
// on the x axis) to path; the extension, .svg or .png, picks the format.
func Plot(path string, res Result) error {
	s := Downsample(res.Series, 2000)
	if len(s) == 0 {
		return fmt.Errorf("no samples to plot")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("GPU allocation, %s policy (%d GPUs)", res.Policy, res.TotalGPUs)
	p.X.Label.Text = "time since the first submission (h)"
	p.Y.Label.Text = "GPUs"
	alloc := make(plotter.XYs, len(s))
	lent := make(plotter.XYs, len(s))
	t0 := float64(s[0].T)
	for i, v := range s {
		x := (float64(v.T) - t0) / 3600
		alloc[i] = plotter.XY{X: x, Y: float64(v.Allocated)}
		lent[i] = plotter.XY{X: x, Y: float64(v.Lent)}
	}
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
