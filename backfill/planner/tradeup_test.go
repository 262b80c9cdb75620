package planner

import (
	"reflect"
	"testing"
)

func TestTradeUpPays(t *testing.T) {
	tests := []struct {
		name                            string
		left, lend, now, after, rescale float64
		want                            bool
	}{
		{"an hour left, 30 % faster: saves 831 s against 66 s", 3600, 3600, 6.2, 8, 30, true},
		{"the lend bounds the time saved", 36000, 120, 6.2, 8, 30, false},
		{"too little time left to pay two resizes", 200, 3600, 6.2, 8, 30, false},
		{"time left not known", 0, 3600, 6.2, 8, 30, false},
		{"not faster", 3600, 3600, 8, 8, 30, false},
		{"free resizes: any gain pays", 10, 3600, 6.2, 8, 0, true},
		{"a negative cost", 3600, 3600, 6.2, 8, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TradeUpPays(tt.left, tt.lend, tt.now, tt.after, tt.rescale); got != tt.want {
				t.Fatalf("TradeUpPays(%v, %v, %v, %v, %v) = %v, want %v", tt.left, tt.lend, tt.now, tt.after, tt.rescale, got, tt.want)
			}
		})
	}
}

func TestPlanTradesUpExtraJobs(t *testing.T) {
	speeds := map[string]float64{"v100": 1, "p100": 0.774, "t4": 0.323}
	lim := Limits{MarginSeconds: 30, MinLendSeconds: 60, MaxLendSeconds: 3600, RescaleSeconds: 30, TradeUp: true}
	// Job 1 at its maximum of 8: 4 V100 of its own and an extra job of 4
	// P100; node v2's 4 V100 are idle.
	nodes := func(idleV100 int) []Node {
		return []Node{{Name: "v1", GPUType: "v100", Total: 4}, {Name: "v2", GPUType: "v100", Total: 4, Idle: idleV100},
			{Name: "p1", GPUType: "p100", Total: 4}}
	}
	job := func(left float64, types []string) RunningJob {
		j := elastic("1", "u", []NodeGPUs{{"v1", 4}}, 1, 8, 8, 8)
		j.Extras = []Extra{{ID: "50", Node: "p1", GPUs: 4, End: 3600}}
		j.TimeLeft, j.GPUTypes = left, types
		return j
	}
	traded := Actions{
		Shrinks: []Shrink{{Job: "1", Extra: "50", Node: "p1", Deadline: 0, Reason: "trading up: GPUs of type v100 are idle and run the job faster"}},
		Grows:   []Grow{{Job: "1", Node: "v2", GPUType: "v100", GPUs: 4, End: 3600, TimeLimit: 3600}},
	}
	tests := []struct {
		name string
		snap Snapshot
		want Actions
	}{
		{name: "an extra job on slower GPUs moves to idle faster ones when the job has long to run",
			snap: Snapshot{Nodes: nodes(4), Running: []RunningJob{job(3600, nil)}},
			want: traded},
		{name: "not when the job ends too soon for the gain to pay two resizes",
			snap: Snapshot{Nodes: nodes(4), Running: []RunningJob{job(200, nil)}}},
		{name: "not when the job's time left is not known",
			snap: Snapshot{Nodes: nodes(4), Running: []RunningJob{job(0, nil)}}},
		{name: "not when too few faster GPUs are idle for the whole extra job",
			snap: Snapshot{Nodes: nodes(3), Running: []RunningJob{job(3600, nil)}}},
		{name: "not onto a type the job may not use",
			snap: Snapshot{Nodes: nodes(4), Running: []RunningJob{job(3600, []string{"p100"})}}},
		{name: "not onto GPUs a pending job's reservation needs within the minimum lend",
			snap: Snapshot{Nodes: nodes(4), Running: []RunningJob{job(3600, nil)},
				Pending: []PendingJob{{ID: "9", PlannedStart: 60, PlannedNodes: []NodeGPUs{{"v2", 0}}}}}},
		{name: "not a held job (its lends keep failing)",
			snap: Snapshot{Nodes: nodes(4), Running: []RunningJob{func() RunningJob { j := job(3600, nil); j.NoGrow = true; return j }()}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.snap.Speeds, tt.snap.Limits = speeds, lim
			got, err := Plan(tt.snap)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Plan:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
