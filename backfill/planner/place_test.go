package planner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/placement"
)

// bruteMakespan enumerates every assignment of l ESTs to the speeds.
func bruteMakespan(l int, speeds []float64) float64 {
	best := math.Inf(1)
	var rec func(i, left int, worst float64)
	rec = func(i, left int, worst float64) {
		if i == len(speeds)-1 {
			best = min(best, max(worst, float64(left)/speeds[i]))
			return
		}
		for c := 0; c <= left; c++ {
			rec(i+1, left-c, max(worst, float64(c)/speeds[i]))
		}
	}
	rec(0, l, 0)
	return best
}

func TestPlaceIsOptimalOnSmallCases(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	choices := []float64{0.25, 0.5, 1, 1.5, 2, 3}
	for iter := range 400 {
		k := 1 + r.IntN(4)
		l := 1 + r.IntN(9)
		gpus := make([]GPU, k)
		speeds := make([]float64, k)
		for i := range gpus {
			speeds[i] = choices[r.IntN(len(choices))]
			gpus[i] = GPU{Node: "n", Type: "t", Speed: speeds[i]}
		}
		p := Place(l, gpus)
		sum := 0
		for _, c := range p.Loads {
			sum += c
		}
		if sum != l {
			t.Fatalf("case %d: loads %v sum to %d, want %d", iter, p.Loads, sum, l)
		}
		if want := bruteMakespan(l, speeds); math.Abs(p.StepTime-want) > 1e-12 {
			t.Fatalf("case %d: Place(%d, %v) step %v, optimum %v", iter, l, speeds, p.StepTime, want)
		}
		sc := make([]SpeedCount, k)
		for i, s := range speeds {
			sc[i] = SpeedCount{s, 1}
		}
		if b, _, _ := bottleneck(l, sc); math.Abs(b-p.StepTime) > 1e-12 {
			t.Fatalf("case %d: grouped bottleneck %v, Place %v", iter, b, p.StepTime)
		}
	}
}

func TestPlaceAgreesWithRuntimePlacement(t *testing.T) {
	tests := []struct {
		name   string
		l      int
		speeds []float64
	}{
		{"equal GPUs share ESTs evenly", 8, []float64{1, 1, 1, 1}},
		{"a GPU twice as fast takes twice the ESTs", 6, []float64{2, 1, 1}},
		{"uneven counts fill the faster GPU first", 7, []float64{1, 1.5, 0.5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gpus := make([]GPU, len(tc.speeds))
			for i, s := range tc.speeds {
				gpus[i] = GPU{Speed: s}
			}
			got := Place(tc.l, gpus)
			rt, err := placement.Compute(tc.l, len(tc.speeds), tc.speeds)
			if err != nil {
				t.Fatalf("runtime placement: %v", err)
			}
			for i, r := range rt {
				if r.Count != got.Loads[i] {
					t.Fatalf("planner loads %v, runtime plan %v", got.Loads, rt)
				}
			}
		})
	}
}

func TestPlaceWithoutUsableGPUsPlacesNothing(t *testing.T) {
	p := Place(4, []GPU{{Speed: 0}, {Speed: -1}})
	if !math.IsInf(p.StepTime, 1) || p.Loads[0] != 0 || p.Loads[1] != 0 {
		t.Errorf("Place on unusable GPUs = %+v, want no loads and infinite step", p)
	}
}

func TestModelThroughput(t *testing.T) {
	m := DefaultModel(4, 2)
	tests := []struct {
		name      string
		gpus      []SpeedCount
		wantThru  float64
		wantWaste float64
	}{
		{"the reference size gives its own GPU count", []SpeedCount{{1, 2}}, 2, 0},
		{"doubling is sub-linear", []SpeedCount{{1, 4}}, 2 * 2.2 / 1.22, 0},
		{"one GPU pays no synchronisation", []SpeedCount{{1, 1}}, 2 * 2.2 / 4, 0},
		{"three GPUs for four ESTs waste a third of their time", []SpeedCount{{1, 3}}, 2 * 2.2 / 2.21, 1 - 4.0/6},
		{"no GPUs give nothing", nil, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			thru, waste := m.Throughput(tc.gpus)
			if math.Abs(thru-tc.wantThru) > 1e-9 || math.Abs(waste-tc.wantWaste) > 1e-9 {
				t.Errorf("Throughput = %.6f, %.6f; want %.6f, %.6f", thru, waste, tc.wantThru, tc.wantWaste)
			}
		})
	}
}

func ExamplePlace() {
	p := Place(10, []GPU{{Node: "n1", Type: "a100", Speed: 2}, {Node: "n2", Type: "v100", Speed: 1}, {Node: "n2", Type: "v100", Speed: 1}})
	fmt.Println(p.Loads, p.StepTime)
	// Output: [6 2 2] 3
}

func ExamplePlan() {
	snap := Snapshot{
		Now:   1000,
		Nodes: []Node{{Name: "n1", GPUType: "v100", Total: 8, Idle: 4}},
		Running: []RunningJob{{ID: "41", User: "ana", Elastic: true, Base: []NodeGPUs{{Node: "n1", GPUs: 4}},
			End: 90000, MinGPUs: 2, MaxGPUs: 8, Model: DefaultModel(8, 4)}},
		Pending: []PendingJob{{ID: "42", PlannedStart: 4600, PlannedNodes: []NodeGPUs{{Node: "n1", GPUs: 4}}}},
		Speeds:  map[string]float64{"v100": 1},
		Limits:  Limits{MarginSeconds: 120, MaxLendSeconds: 7200},
	}
	a, err := Plan(snap)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, g := range a.Grows {
		fmt.Printf("grow job %s by %d %s GPUs on %s for %d s\n", g.Job, g.GPUs, g.GPUType, g.Node, g.TimeLimit)
	}
	// Output: grow job 41 by 4 v100 GPUs on n1 for 3480 s
}
