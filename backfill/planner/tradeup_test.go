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
		Shrinks: []Shrink{{Job: "1", Extra: "50", Node: "p1", Deadline: 0, Trade: true, Reason: "trading up: GPUs of type v100 are idle and run the job faster"}},
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

// Helper 110's findings, each a row: a trade never lends past the job's
// maximum or the lend caps while the GPUs it ends are still held, never
// trades an extra job already leaving, weighs the slow extra job's own
// end, trades several slow extra jobs together when only together they
// speed the job up, and gives back the GPUs of a trade it drops.
func TestTradeUpKeepsTheLimits(t *testing.T) {
	speeds := map[string]float64{"v100": 1, "p100": 0.774, "t4": 0.323}
	lim := Limits{MarginSeconds: 30, MinLendSeconds: 60, MaxLendSeconds: 3600, RescaleSeconds: 30, TradeUp: true}
	node := func(name, typ string, idle int) Node { return Node{Name: name, GPUType: typ, Total: 4, Idle: idle} }
	job := func(id string, base string, maxG, lw int, left float64, extras ...Extra) RunningJob {
		j := elastic(id, "u"+id, []NodeGPUs{{base, 4}}, 1, maxG, lw, 4)
		j.Extras, j.TimeLeft = extras, left
		return j
	}
	p100 := Extra{ID: "50", Node: "p1", GPUs: 4, End: 3600}
	tests := []struct {
		name   string
		snap   Snapshot
		limits func(*Limits)
		want   []string // the extra jobs ended and the nodes lent, in order
	}{
		{name: "an extra job the daemon already signalled is not traded again, and the job at its maximum with it is lent nothing",
			snap: Snapshot{Nodes: []Node{node("v1", "v100", 0), node("v2", "v100", 0), node("v3", "v100", 4), node("p1", "p100", 0)},
				Running: []RunningJob{job("1", "v1", 8, 12, 3600, Extra{ID: "100", Node: "v2", GPUs: 4, End: 3600},
					Extra{ID: "50", Node: "p1", GPUs: 4, End: 30, Leaving: true})}}},
		{name: "an extra job the daemon already signalled is not traded again, even within the job's maximum",
			snap: Snapshot{Nodes: []Node{node("v1", "v100", 0), node("v2", "v100", 0), node("v3", "v100", 4), node("p1", "p100", 0)},
				Running: []RunningJob{job("1", "v1", 12, 12, 3600, Extra{ID: "100", Node: "v2", GPUs: 4, End: 3600},
					Extra{ID: "50", Node: "p1", GPUs: 4, End: 3600, Leaving: true})}}},
		{name: "a job over its maximum with extra jobs not leaving (a trade half done) loses its slowest at once",
			snap: Snapshot{Nodes: []Node{node("v1", "v100", 0), node("v2", "v100", 0), node("v3", "v100", 4), node("p1", "p100", 0)},
				Running: []RunningJob{job("1", "v1", 8, 12, 3600, Extra{ID: "100", Node: "v2", GPUs: 4, End: 3600}, p100)}},
			want: []string{"end 50"}},
		{name: "not past the per-user lend cap while the slow GPUs are still held",
			snap:   Snapshot{Nodes: []Node{node("v1", "v100", 0), node("v2", "v100", 4), node("p1", "p100", 0)}, Running: []RunningJob{job("1", "v1", 8, 8, 3600, p100)}},
			limits: func(l *Limits) { l.MaxExtraGPUsPerUser = 4 }},
		{name: "not past the per-job lend cap",
			snap:   Snapshot{Nodes: []Node{node("v1", "v100", 0), node("v2", "v100", 4), node("p1", "p100", 0)}, Running: []RunningJob{job("1", "v1", 8, 8, 3600, p100)}},
			limits: func(l *Limits) { l.MaxExtraGPUsPerJob = 4 }},
		{name: "within the caps when they have room",
			snap:   Snapshot{Nodes: []Node{node("v1", "v100", 0), node("v2", "v100", 4), node("p1", "p100", 0)}, Running: []RunningJob{job("1", "v1", 8, 8, 3600, p100)}},
			limits: func(l *Limits) { l.MaxExtraGPUsPerJob, l.MaxExtraGPUsPerUser = 8, 8 },
			want:   []string{"end 50", "lend v2"}},
		{name: "not an extra job whose own lend ends too soon for the gain to pay",
			snap: Snapshot{Nodes: []Node{node("v1", "v100", 0), node("v2", "v100", 4), node("p1", "p100", 0)},
				Running: []RunningJob{job("1", "v1", 8, 8, 3600, Extra{ID: "50", Node: "p1", GPUs: 4, End: 90})}}},
		{name: "two slow extra jobs that only together speed the job up are traded together",
			snap: Snapshot{Nodes: []Node{node("v1", "v100", 0), node("v2", "v100", 4), node("v3", "v100", 4), node("p1", "p100", 0), node("p2", "p100", 0)},
				Running: []RunningJob{job("1", "v1", 12, 12, 3600, p100, Extra{ID: "51", Node: "p2", GPUs: 4, End: 3600})}},
			want: []string{"end 50", "end 51", "lend v2", "lend v3"}},
		{name: "a trade dropped for a lend too short gives its GPUs back to the next job's",
			snap: Snapshot{Nodes: []Node{node("v1", "v100", 0), node("v3", "v100", 0), node("v2", "v100", 4), node("p1", "p100", 0), node("p2", "p100", 0)},
				Running: []RunningJob{func() RunningJob {
					j := job("1", "v1", 8, 8, 80, Extra{ID: "50", Node: "p1", GPUs: 4, End: 3600})
					j.End = 80
					return j
				}(), job("2", "v3", 8, 8, 3600, Extra{ID: "51", Node: "p2", GPUs: 4, End: 3600})}},
			limits: func(l *Limits) { l.RescaleSeconds = 0 },
			want:   []string{"end 51", "lend v2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.snap.Speeds, tt.snap.Limits = speeds, lim
			if tt.limits != nil {
				tt.limits(&tt.snap.Limits)
			}
			got, err := Plan(tt.snap)
			if err != nil {
				t.Fatal(err)
			}
			var did []string
			for _, s := range got.Shrinks {
				did = append(did, "end "+s.Extra)
			}
			for _, g := range got.Grows {
				did = append(did, "lend "+g.Node)
			}
			if !reflect.DeepEqual(did, tt.want) {
				t.Fatalf("Plan: %q, want %q (%+v)", did, tt.want, got)
			}
		})
	}
}
