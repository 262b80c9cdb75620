package planner

import (
	"errors"
	"reflect"
	"testing"
)

// A waiting job Slurm has not planned yet holds the GPUs it may start on
// from grows for Limits.UnplannedHoldSeconds after it was first seen.
func TestUnplannedJobHoldsGrowsOnItsPossibleNodes(t *testing.T) {
	speeds := map[string]float64{"v100": 1, "t4": 1} // equal speeds: no imbalance cap
	nodes := []Node{{Name: "v1", GPUType: "v100", Total: 4, Idle: 2}, {Name: "v2", GPUType: "v100", Total: 4, Idle: 4},
		{Name: "t1", GPUType: "t4", Total: 4, Idle: 4}}
	running := func() []RunningJob {
		// 24 logical workers: 6, 8 and 12 GPUs each share them evenly.
		return []RunningJob{elastic("1", "u", []NodeGPUs{{"v1", 2}}, 1, 12, 24, 2)}
	}
	lim := Limits{MinLendSeconds: 60, MaxLendSeconds: 3600, UnplannedHoldSeconds: 60}
	tests := []struct {
		name      string
		unplanned []UnplannedJob
		hold      int64
		want      map[string]int // GPUs grown onto each node
	}{
		{name: "no waiting job: every idle GPU is lent", want: map[string]int{"v1": 2, "v2": 4, "t1": 4}},
		{name: "a job just submitted for every v100 holds both v100 nodes",
			unplanned: []UnplannedJob{{ID: "9", Seen: 990, Nodes: []NodeGPUs{{"v1", 0}, {"v2", 0}}}},
			want:      map[string]int{"t1": 4}},
		{name: "a job asking 2 GPUs per node holds 2 of each; v1 has 2 idle, so none there",
			unplanned: []UnplannedJob{{ID: "9", Seen: 1000, Nodes: []NodeGPUs{{"v1", 2}, {"v2", 2}}}},
			want:      map[string]int{"v2": 2, "t1": 4}},
		{name: "two jobs' holds add up on a node, to at most its GPUs",
			unplanned: []UnplannedJob{{ID: "8", Seen: 1000, Nodes: []NodeGPUs{{"v2", 2}}}, {ID: "9", Seen: 1000, Nodes: []NodeGPUs{{"v2", 3}}}},
			want:      map[string]int{"v1": 2, "t1": 4}},
		{name: "a job seen the hold or longer ago holds nothing (Slurm never planned it: not held forever)",
			unplanned: []UnplannedJob{{ID: "9", Seen: 940, Nodes: []NodeGPUs{{"v1", 0}, {"v2", 0}}}},
			want:      map[string]int{"v1": 2, "v2": 4, "t1": 4}},
		{name: "a hold of 0 seconds holds nothing", hold: -1,
			unplanned: []UnplannedJob{{ID: "9", Seen: 1000, Nodes: []NodeGPUs{{"v1", 0}, {"v2", 0}}}},
			want:      map[string]int{"v1": 2, "v2": 4, "t1": 4}},
		{name: "nodes the snapshot does not list are ignored",
			unplanned: []UnplannedJob{{ID: "9", Seen: 1000, Nodes: []NodeGPUs{{"elsewhere", 0}, {"t1", 4}}}},
			want:      map[string]int{"v1": 2, "v2": 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := lim
			if tc.hold < 0 {
				l.UnplannedHoldSeconds = 0
			}
			s := Snapshot{Now: 1000, Nodes: nodes, Running: running(), Unplanned: tc.unplanned, Speeds: speeds, Limits: l,
				NothingQueued: true}
			acts, err := Plan(s)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, g := range acts.Grows {
				got[g.Node] += g.GPUs
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("grown onto %v, want %v (grows %+v)", got, tc.want, acts.Grows)
			}
			if len(acts.Shrinks) != 0 {
				t.Errorf("shrinks %+v: a hold never shrinks a running extra job", acts.Shrinks)
			}
		})
	}
}

// A hold keeps grows off but leaves a running extra job where it is.
func TestUnplannedHoldDoesNotShrinkExtras(t *testing.T) {
	j := elastic("1", "u", []NodeGPUs{{"v1", 2}}, 1, 4, 4, 2)
	j.Extras = []Extra{{ID: "x", Node: "v1", GPUs: 2, End: 5000}}
	s := Snapshot{Now: 1000, Nodes: []Node{{Name: "v1", GPUType: "v100", Total: 4, Idle: 0}}, Running: []RunningJob{j},
		Unplanned: []UnplannedJob{{ID: "9", Seen: 1000, Nodes: []NodeGPUs{{"v1", 0}}}},
		Speeds:    map[string]float64{"v100": 1}, Limits: Limits{UnplannedHoldSeconds: 60}}
	acts, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(acts.Shrinks)+len(acts.Grows) != 0 {
		t.Errorf("got %+v, want no action", acts)
	}
}

func TestUnplannedNegativeGPUsIsInvalid(t *testing.T) {
	s := Snapshot{Nodes: []Node{{Name: "v1", GPUType: "v100", Total: 4, Idle: 4}}, Speeds: map[string]float64{"v100": 1},
		Unplanned: []UnplannedJob{{ID: "9", Nodes: []NodeGPUs{{"v1", -1}}}}}
	if _, err := Plan(s); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("Plan = %v, want ErrInvalidSnapshot", err)
	}
}
