package planner

import (
	"errors"
	"testing"
)

// TestAJobsOwnSpeedsChooseTheTypeItGrowsOnto checks that a job's declared
// per-type speeds (RunningJob.Speeds) take precedence over the site's table:
// a d2 job with room for one more GPU, idle T4 and A100 nodes, grows onto
// the A100 by the site's table but onto the T4 when it says it runs faster
// there (a model whose kernels suit the T4, say), and a type it does not
// list keeps the site's speed.
func TestAJobsOwnSpeedsChooseTheTypeItGrowsOnto(t *testing.T) {
	site := map[string]float64{"v100": 1, "t4": 0.52, "a100": 1.24}
	tests := []struct {
		name   string
		speeds map[string]float64
		want   string
	}{
		{name: "without its own speeds the site's fastest type wins", speeds: nil, want: "a100"},
		{name: "its own faster T4 wins", speeds: map[string]float64{"t4": 2}, want: "t4"},
		{name: "a slower A100 of its own loses to the site's T4", speeds: map[string]float64{"a100": 0.3}, want: "t4"},
		{name: "a type it does not list keeps the site's speed", speeds: map[string]float64{"v100": 1}, want: "a100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := Snapshot{
				Now: 0,
				Nodes: []Node{{Name: "v", GPUType: "v100", Total: 1, Idle: 0}, {Name: "t", GPUType: "t4", Total: 4, Idle: 4},
					{Name: "a", GPUType: "a100", Total: 4, Idle: 4}},
				Running: []RunningJob{{ID: "1", User: "u", Elastic: true, Base: []NodeGPUs{{Node: "v", GPUs: 1}}, End: 7200,
					MinGPUs: 1, MaxGPUs: 2, Model: DefaultModel(8, 1), Speeds: tc.speeds}},
				Speeds: site,
				Limits: Limits{MaxLendSeconds: 3600},
			}
			a, err := Plan(snap)
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Grows) != 1 || a.Grows[0].GPUType != tc.want || a.Grows[0].GPUs != 1 {
				t.Fatalf("grows %+v, want one GPU of %s", a.Grows, tc.want)
			}
		})
	}
}

func TestPlanRejectsABadJobSpeed(t *testing.T) {
	for _, v := range []float64{0, -1, 101} {
		snap := Snapshot{Nodes: []Node{{Name: "n", GPUType: "v100", Total: 2, Idle: 1}},
			Running: []RunningJob{{ID: "1", Elastic: true, Base: []NodeGPUs{{Node: "n", GPUs: 1}}, MinGPUs: 1, MaxGPUs: 2,
				Model: DefaultModel(2, 1), Speeds: map[string]float64{"v100": v}}},
			Speeds: map[string]float64{"v100": 1}}
		if _, err := Plan(snap); !errors.Is(err, ErrInvalidSnapshot) {
			t.Errorf("job speed %v: Plan error %v, want ErrInvalidSnapshot", v, err)
		}
	}
}
