package runplot

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// element is one SVG element: its name, attributes and text.
type element struct {
	name  string
	attrs map[string]string
	text  string
}

// parse decodes svg as XML (failing the test when it is not well formed)
// and returns its elements in document order.
func parse(t *testing.T, svg []byte) []element {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var out []element
	var open []int
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := element{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			out = append(out, e)
			open = append(open, len(out)-1)
		case xml.EndElement:
			open = open[:len(open)-1]
		case xml.CharData:
			if len(open) > 0 {
				out[open[len(open)-1]].text += string(tok)
			}
		}
	}
	return out
}

// withClass returns the elements of class class, in order.
func withClass(es []element, class string) []element {
	var out []element
	for _, e := range es {
		if e.attrs["class"] == class {
			out = append(out, e)
		}
	}
	return out
}

// marks returns "run:step" of each element, in order.
func marks(es []element) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.attrs["data-run"]+":"+e.attrs["data-step"])
	}
	return out
}

// series makes steps 1..n with the given workers per step (the last value
// repeats) and a loss that decreases.
func series(n int, workers ...int) []Step {
	var out []Step
	for s := 1; s <= n; s++ {
		w := workers[min(s-1, len(workers)-1)]
		out = append(out, Step{Step: int64(s), Loss: 2 / float64(s), Workers: w, Digest: fmt.Sprintf("sha256:%04x", s)})
	}
	return out
}

// fixed is a run of 8 workers for 10 steps; elastic the same job on 2, then
// 4 from step boundary 3, then 3 (a worker lost, step 7 redone), then 8.
func fixedAndElastic() (Run, Run) {
	fixed := Run{Label: "fixed", JobID: "sha256:aa", JobName: "mnist-lenet", LogicalWorkers: 8, Steps: series(10, 8),
		Allocations: []Allocation{{Step: 0, Workers: 8, Placement: "0|1|2|3|4|5|6|7", Reason: "schedule"}}}
	el := Run{Label: "elastic", JobID: "sha256:aa", JobName: "mnist-lenet", LogicalWorkers: 8,
		Steps: series(10, 2, 2, 2, 4, 4, 4, 3, 3, 8),
		Allocations: []Allocation{
			{Step: 0, Workers: 2, Placement: "0-3|4-7", Reason: "schedule"},
			{Step: 3, Workers: 4, Placement: "0-1|2-3|4-5|6-7", Reason: "schedule"},
			{Step: 6, Workers: 3, Placement: "0-2|3-5|6-7", Reason: "lost workers"},
			{Step: 8, Workers: 8, Placement: "0|1|2|3|4|5|6|7", Reason: "schedule"},
		}}
	el.Steps[6].Redo, el.Steps[6].Redos = true, 1
	return fixed, el
}

func TestSVGDrawsEachRunAndMarksItsReallocationsAndRedoneSteps(t *testing.T) {
	fixed, el := fixedAndElastic()
	resumed := el
	resumed.Label = "resumed"
	// A resume records the allocation in force again: not a change.
	resumed.Allocations = append(slices.Clone(el.Allocations[:2]), Allocation{Step: 3, Workers: 4, Placement: "0-1|2-3|4-5|6-7", Reason: "schedule"})
	diverged := el
	diverged.Label = "diverged"
	diverged.Steps = slices.Clone(el.Steps)
	diverged.Steps[4].Digest = "sha256:ffff"
	// Steps 2-4 of sparse were not hashed (the torch engine hashes every
	// K steps): they are not compared, whatever the other run recorded.
	sparse := el
	sparse.Label = "sparse"
	sparse.Steps = slices.Clone(el.Steps)
	for i := 1; i <= 3; i++ {
		sparse.Steps[i].Digest, sparse.Steps[i].Unhashed = "", true
	}
	unhashed := el
	unhashed.Label = "unhashed"
	unhashed.Steps = slices.Clone(el.Steps)
	for i := range unhashed.Steps {
		unhashed.Steps[i].Digest, unhashed.Steps[i].Unhashed = "", true
	}
	tests := []struct {
		name          string
		runs          []Run
		wantRealloc   []string // data-run:data-step of the reallocation lines
		wantRedo      []string
		wantWorkers   []string // points of each workers polyline, as x@y in data units
		wantInCaption []string
	}{
		{
			name: "a fixed and an elastic run: two curves each, the elastic run's changes marked",
			runs: []Run{fixed, el}, wantRealloc: []string{"1:3", "1:6", "1:8"}, wantRedo: []string{"1:7"},
			wantInCaption: []string{"fixed and elastic: bit-identical parameters after each of the 10 common steps"},
		},
		{
			name: "one run alone is drawn with its last digest",
			runs: []Run{el}, wantRealloc: []string{"0:3", "0:6", "0:8"}, wantRedo: []string{"0:7"},
			wantInCaption: []string{"elastic: step 10, parameters sha256:000a"},
		},
		{
			name: "an allocation recorded again on resume is not a reallocation",
			runs: []Run{resumed}, wantRealloc: []string{"0:3"}, wantRedo: []string{"0:7"},
		},
		{
			name: "a run whose digests differ is named with the first divergent step",
			runs: []Run{fixed, diverged}, wantRealloc: []string{"1:3", "1:6", "1:8"}, wantRedo: []string{"1:7"},
			wantInCaption: []string{"diverged DIVERGES from fixed at step 5"},
		},
		{
			name: "steps left unhashed are not compared, and counted",
			runs: []Run{fixed, sparse}, wantRealloc: []string{"1:3", "1:6", "1:8"}, wantRedo: []string{"1:7"},
			wantInCaption: []string{"fixed and sparse: bit-identical parameters after each of the 7 common steps (last 10; 3 common steps unhashed in one run or both, not compared)"},
		},
		{
			name: "a divergence is found among the hashed steps",
			runs: []Run{sparse, diverged}, wantRealloc: []string{"0:3", "0:6", "0:8", "1:3", "1:6", "1:8"}, wantRedo: []string{"0:7", "1:7"},
			wantInCaption: []string{"diverged DIVERGES from sparse at step 5 (7 common steps compared; 3 common steps unhashed"},
		},
		{
			name: "runs that share no hashed step say so",
			runs: []Run{fixed, unhashed}, wantRealloc: []string{"1:3", "1:6", "1:8"}, wantRedo: []string{"1:7"},
			wantInCaption: []string{"fixed and unhashed share no hashed step: nothing to compare; 10 common steps unhashed"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svg, err := SVG(tc.runs)
			if err != nil {
				t.Fatal(err)
			}
			es := parse(t, svg)
			if es[0].name != "svg" {
				t.Fatalf("root element %q, want svg", es[0].name)
			}
			for _, class := range []string{"loss", "workers"} {
				lines := withClass(es, class)
				if len(lines) != len(tc.runs) {
					t.Fatalf("%d polylines of class %s for %d runs", len(lines), class, len(tc.runs))
				}
				for i, l := range lines {
					if l.name != "polyline" || l.attrs["data-run"] != fmt.Sprint(i) {
						t.Errorf("%s line %d is <%s data-run=%q>", class, i, l.name, l.attrs["data-run"])
					}
				}
			}
			if got := marks(withClass(es, "realloc")); !slices.Equal(got, tc.wantRealloc) {
				t.Errorf("reallocation marks %v, want %v", got, tc.wantRealloc)
			}
			if got := marks(withClass(es, "redo")); !slices.Equal(got, tc.wantRedo) {
				t.Errorf("redo marks %v, want %v", got, tc.wantRedo)
			}
			caption := withClass(es, "caption")
			var text []string
			for _, c := range caption {
				text = append(text, c.text)
			}
			for _, w := range tc.wantInCaption {
				if !strings.Contains(strings.Join(text, "\n"), w) {
					t.Errorf("caption %q lacks %q", text, w)
				}
			}
		})
	}
}

// coords decodes a polyline's points.
func coords(t *testing.T, points string) [][2]float64 {
	t.Helper()
	var out [][2]float64
	for _, p := range strings.Fields(points) {
		var x, y float64
		if _, err := fmt.Sscanf(p, "%f,%f", &x, &y); err != nil {
			t.Fatalf("point %q: %v", p, err)
		}
		out = append(out, [2]float64{x, y})
	}
	return out
}

func TestSVGPlacesPointsOnTheStepAxis(t *testing.T) {
	fixed, el := fixedAndElastic()
	svg, err := SVG([]Run{fixed, el})
	if err != nil {
		t.Fatal(err)
	}
	c := newCanvas([]Run{fixed, el})
	es := parse(t, svg)
	loss := coords(t, withClass(es, "loss")[1].attrs["points"])
	if len(loss) != 10 {
		t.Fatalf("%d loss points for 10 steps", len(loss))
	}
	for i, p := range loss {
		step := float64(i + 1)
		if math.Abs(p[0]-c.x(step)) > 0.051 || math.Abs(p[1]-c.yLoss(2/step)) > 0.051 {
			t.Errorf("loss point %d at %v, want (%.1f, %.1f)", i, p, c.x(step), c.yLoss(2/step))
		}
	}
	// The workers step function: 2 over steps 1-3, 4 over 4-6, 3 over 7-8, 8 over 9-10.
	var want [][2]float64
	for _, seg := range []struct{ from, to, w float64 }{{0, 3, 2}, {3, 6, 4}, {6, 8, 3}, {8, 10, 8}} {
		want = append(want, [2]float64{c.x(seg.from), c.yWorkers(seg.w)}, [2]float64{c.x(seg.to), c.yWorkers(seg.w)})
	}
	got := coords(t, withClass(es, "workers")[1].attrs["points"])
	if len(got) != len(want) {
		t.Fatalf("workers corners %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i][0]-want[i][0]) > 0.051 || math.Abs(got[i][1]-want[i][1]) > 0.051 {
			t.Errorf("workers corner %d at %v, want %v", i, got[i], want[i])
		}
	}
	for _, r := range withClass(es, "realloc") {
		if r.attrs["data-step"] == "3" && r.attrs["x1"] != num(c.x(3)) {
			t.Errorf("reallocation at boundary 3 drawn at x=%s, want %s", r.attrs["x1"], num(c.x(3)))
		}
	}
}

func TestSVGEscapesNamesAndSkipsLossesThatAreNotNumbers(t *testing.T) {
	fixed, _ := fixedAndElastic()
	fixed.Label = `<script>alert("x")</script> & co`
	fixed.JobName = "job</text><svg>"
	fixed.Steps[3].Loss = math.NaN()
	fixed.Steps[5].Loss = math.Inf(1)
	svg, err := SVG([]Run{fixed})
	if err != nil {
		t.Fatal(err)
	}
	es := parse(t, svg)
	for _, e := range es {
		if e.name == "script" || (e.name == "svg" && e.attrs["viewBox"] == "") {
			t.Fatalf("a name became an element <%s>", e.name)
		}
	}
	if !bytes.Contains(svg, []byte("&lt;script&gt;")) {
		t.Error("the label is not in the picture, escaped")
	}
	if n := len(coords(t, withClass(es, "loss")[0].attrs["points"])); n != 8 {
		t.Errorf("%d loss points for 10 steps of which 2 are not finite, want 8", n)
	}
}

func TestSVGKeepsALongRunSmall(t *testing.T) {
	r := Run{Label: "long", JobID: "j", JobName: "long", LogicalWorkers: 8}
	for s := 1; s <= 200000; s++ {
		r.Steps = append(r.Steps, Step{Step: int64(s), Loss: 1 + math.Sin(float64(s)), Workers: 1 + s/50000, Digest: "sha256:00"})
	}
	svg, err := SVG([]Run{r})
	if err != nil {
		t.Fatal(err)
	}
	es := parse(t, svg)
	pts := coords(t, withClass(es, "loss")[0].attrs["points"])
	if len(pts) > maxPoints+4*2 || len(svg) > 200<<10 {
		t.Fatalf("200000 steps drawn with %d loss points in %d bytes", len(pts), len(svg))
	}
	// The extremes survive the thinning.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		lo, hi = min(lo, p[1]), max(hi, p[1])
	}
	c := newCanvas([]Run{r})
	if math.Abs(hi-c.yLoss(0)) > 1 || math.Abs(lo-c.yLoss(2)) > 1 {
		t.Errorf("thinned loss spans y %.1f..%.1f, want the extremes %.1f..%.1f", lo, hi, c.yLoss(2), c.yLoss(0))
	}
}

func TestSVGRefusesWhatItCannotDraw(t *testing.T) {
	fixed, el := fixedAndElastic()
	other := el
	other.Label, other.JobID, other.JobName = "other", "sha256:bb", "charlm"
	empty := el
	empty.Label, empty.Steps = "empty", nil
	unordered := el
	unordered.Label = "unordered"
	unordered.Steps = slices.Clone(el.Steps)
	unordered.Steps[2], unordered.Steps[3] = unordered.Steps[3], unordered.Steps[2]
	tests := []struct {
		name string
		runs []Run
		want []string
	}{
		{"no run at all", nil, []string{"no run given"}},
		{"runs of different jobs are named with both jobs", []Run{fixed, other}, []string{"fixed", "other", "different jobs", "mnist-lenet", "charlm", "one job file"}},
		{"a run without a completed step", []Run{fixed, empty}, []string{"empty", "no completed step"}},
		{"steps out of order", []Run{unordered}, []string{"unordered", "step 3 follows step 4"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svg, err := SVG(tc.runs)
			if err == nil {
				t.Fatalf("SVG drew %d bytes, want an error", len(svg))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestSVGGolden compares the whole picture of fixedAndElastic with
// testdata/fixed-elastic.svg (go test -run TestSVGGolden -update rewrites
// it; look at it before committing).
func TestSVGGolden(t *testing.T) {
	fixed, el := fixedAndElastic()
	svg, err := SVG([]Run{fixed, el})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "fixed-elastic.svg")
	if *update {
		if err := os.WriteFile(path, svg, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestSVGGolden -update)", err)
	}
	if !bytes.Equal(svg, want) {
		t.Errorf("the picture differs from %s (go test -run TestSVGGolden -update rewrites it):\n%s", path, svg)
	}
}

func TestTicksAreRoundAndCoverTheRange(t *testing.T) {
	tests := []struct {
		name    string
		hi      float64
		n       int
		want    []float64
		wantEnd float64
	}{
		{"234 steps in about 8 ticks of 50", 234, 8, []float64{0, 50, 100, 150, 200, 250}, 250},
		{"a loss of 2.33 in about 5 ticks of 0.5", 2.33, 5, []float64{0, 0.5, 1, 1.5, 2, 2.5}, 2.5},
		{"8 workers in about 4 ticks of 2", 8, 4, []float64{0, 2, 4, 6, 8}, 8},
		{"nothing to show counts as 1", math.NaN(), 4, []float64{0, 0.5, 1}, 1},
		{"a value whose spacing underflows gives the ends", 5e-324, 5, []float64{0, 5e-324}, 5e-324},
		{"the largest float gives a finite number of ticks", math.MaxFloat64, 5, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, end := ticks(tc.hi, tc.n)
			if tc.want == nil {
				if len(got) > 2*tc.n+4 {
					t.Fatalf("%d ticks", len(got))
				}
				return
			}
			if len(got) != len(tc.want) || end != tc.wantEnd {
				t.Fatalf("ticks(%v, %d) = %v, %v; want %v, %v", tc.hi, tc.n, got, end, tc.want, tc.wantEnd)
			}
			for i := range got {
				if math.Abs(got[i]-tc.want[i]) > 1e-12*math.Max(1, tc.want[i]) {
					t.Fatalf("ticks(%v, %d) = %v; want %v", tc.hi, tc.n, got, tc.want)
				}
			}
		})
	}
}

// TestTheLegendAvoidsTheCurves: a run whose loss stays high to its last
// step (a short run) would be hidden under a legend at the top right; the
// legend goes to the corner that covers the fewest loss points.
func TestTheLegendAvoidsTheCurves(t *testing.T) {
	flat := Run{Label: "short", JobID: "sha256:aa", JobName: "j", LogicalWorkers: 8, Steps: series(12, 8)}
	for i := range flat.Steps {
		flat.Steps[i].Loss = 2.3 - 0.001*float64(i) // stays at the top of the panel
	}
	c := newCanvas([]Run{flat})
	x, y := c.legendCorner([]Run{flat}, 200, 60)
	if x > float64(left+plotW)/2 && y < (c.lossTop+c.lossBot)/2 {
		t.Errorf("legend at the top right (%v, %v), over a loss curve that stays at the top", x, y)
	}
	for _, st := range flat.Steps {
		px, py := c.x(float64(st.Step)), c.yLoss(st.Loss)
		if px >= x && px <= x+200 && py >= y && py <= y+60 {
			t.Errorf("step %d's loss point (%v, %v) is under the legend at (%v, %v)", st.Step, px, py, x, y)
		}
	}
}
