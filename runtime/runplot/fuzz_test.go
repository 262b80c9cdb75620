package runplot

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"testing"
)

// FuzzSVGIsWellFormed: whatever the names (state directory names, job
// names) and numbers, the picture is well-formed XML with one loss
// polyline per run, or an error.
func FuzzSVGIsWellFormed(f *testing.F) {
	f.Add("fixed", "mnist-lenet", 2.5, 8, int64(1))
	f.Add(`<script>"'&`, "]]><x/>", math.NaN(), 0, int64(1<<40))
	f.Add("\x00\xff\u2028", "", math.Inf(-1), -3, int64(-1))
	f.Fuzz(func(t *testing.T, label, job string, loss float64, workers int, step int64) {
		fixed, el := fixedAndElastic()
		fixed.Label, el.Label, fixed.JobName, el.JobName = label, label+"2", job, job
		el.Steps[2].Loss, el.Steps[3].Workers = loss, workers
		el.Steps[len(el.Steps)-1].Step = max(el.Steps[len(el.Steps)-1].Step, step)
		svg, err := SVG([]Run{fixed, el})
		if err != nil {
			return
		}
		dec := xml.NewDecoder(bytes.NewReader(svg))
		polylines := 0
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("not well-formed: %v\n%s", err, svg)
			}
			if s, ok := tok.(xml.StartElement); ok && s.Name.Local == "polyline" {
				polylines++
			}
		}
		if polylines != 4 {
			t.Fatalf("%d polylines for 2 runs, want 4", polylines)
		}
	})
}
