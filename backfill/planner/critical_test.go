package planner

import (
	"math"
	"testing"
)

func TestCriticalDelay(t *testing.T) {
	// Two 4-GPU v100 nodes and one t4 node. n1 is idle; n2 frees at 1,000 s;
	// the t4 node at 5,000 s. The longest running job ends at 5,000 s
	// (Horizon). The hold is all of n1 until 3,000 s.
	c := NewCluster([]Node{{Name: "n1", GPUType: "v100", Total: 4}, {Name: "n2", GPUType: "v100", Total: 4},
		{Name: "n3", GPUType: "t4", Total: 4}}, map[string]float64{"v100": 3, "t4": 1})
	base := func(q ...CriticalJob) CriticalDelayInput {
		return CriticalDelayInput{Now: 0, Avail: []int{4, 0, 0}, Horizon: 5000,
			Releases: []Release{{At: 5000, Alloc: []Alloc{{Node: 2, GPUs: 4}}}, {At: 1000, Alloc: []Alloc{{Node: 1, GPUs: 4}}}},
			Hold:     []Alloc{{Node: 0, GPUs: 4}}, Until: 3000, Queued: q}
	}
	v100 := FitRule{Types: []string{"v100"}, OneType: true}
	tests := []struct {
		name string
		in   CriticalDelayInput
		want float64
	}{
		{"a long job needing both v100 nodes starts at 3,000 s instead of 1,000", base(CriticalJob{GPUs: 8, Rule: v100, Run: 10000}), 2000},
		{"only the part past every running job's end counts: 3,000 + 3,500 − 5,000", base(CriticalJob{GPUs: 8, Rule: v100, Run: 3500}), 1500},
		{"a job that ends before the horizon even when delayed counts 0", base(CriticalJob{GPUs: 8, Rule: v100, Run: 1500}), 0},
		{"a job that fits now on the held node waits for n2 instead (1,000 s)", base(CriticalJob{GPUs: 4, Rule: v100, Run: 10000}), 1000},
		{"a job that fits beside the hold is not delayed", func() CriticalDelayInput {
			in := base(CriticalJob{GPUs: 4, Rule: v100, Run: 10000})
			in.Avail = []int{4, 4, 0}
			return in
		}(), 0},
		{"a job of another type is not weighed", base(CriticalJob{GPUs: 4, Rule: FitRule{Types: []string{"t4"}}, Run: 10000}), 0},
		{"a job that can never start counts 0", base(CriticalJob{GPUs: 16, Rule: v100, Run: 10000}), 0},
		{"delays are summed", base(CriticalJob{GPUs: 8, Rule: v100, Run: 10000}, CriticalJob{GPUs: 8, Run: 10000}), 4000},
		{"no request, nothing weighed", base(CriticalJob{GPUs: 0, Rule: v100, Run: 10000}), 0},
		{"a job that may start only on n2 is not delayed by a hold on n1", base(CriticalJob{GPUs: 4, Rule: v100, Run: 10000, On: []bool{false, true, false}}), 0},
		{"a job that may start on n1 is", base(CriticalJob{GPUs: 4, Rule: v100, Run: 10000, On: []bool{true, false, false}}), 3000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]int(nil), tc.in.Avail...)
			if got := c.CriticalDelay(tc.in); got != tc.want {
				t.Errorf("CriticalDelay = %v, want %v", got, tc.want)
			}
			for i := range before {
				if tc.in.Avail[i] != before[i] {
					t.Fatalf("CriticalDelay changed its input's Avail: %v, was %v", tc.in.Avail, before)
				}
			}
		})
	}
}

func TestMayBeDelayed(t *testing.T) {
	v100 := map[string]bool{"v100": true}
	tests := []struct {
		name string
		q    CriticalJob
		want bool
	}{
		{"a long job of the held type", CriticalJob{GPUs: 4, Rule: FitRule{Types: []string{"v100"}}, Run: 5000}, true},
		{"an untyped job", CriticalJob{GPUs: 4, Run: 5000}, true},
		{"a job of another type", CriticalJob{GPUs: 4, Rule: FitRule{Types: []string{"t4"}}, Run: 5000}, false},
		{"a job that ends before the horizon even when held the whole hold (1,000 + 3,000 ≤ 5,000)", CriticalJob{GPUs: 4, Run: 3000}, false},
		{"just past it", CriticalJob{GPUs: 4, Run: 4001}, true},
		{"no GPUs asked", CriticalJob{GPUs: 0, Run: 5000}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.q.MayBeDelayed(v100, 1000, 5000); got != tc.want {
				t.Errorf("MayBeDelayed = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestEarliestStartPlacesPerNodeRequestsAsSlurmDoes: with 3 and 1 GPUs
// free, --gpus=4 starts now, but -N2 --gres=gpu:2 waits for the second
// node's release.
func TestEarliestStartPlacesPerNodeRequestsAsSlurmDoes(t *testing.T) {
	c := NewCluster([]Node{{Name: "n1", GPUType: "v100", Total: 4}, {Name: "n2", GPUType: "v100", Total: 4}}, nil)
	rels := []Release{{At: 500, Alloc: []Alloc{{1, 3}}}}
	for _, tc := range []struct {
		job  CriticalJob
		want int64
	}{
		{CriticalJob{GPUs: 4}, 100},
		{CriticalJob{GPUs: 4, PerNode: 2}, 500},
		{CriticalJob{GPUs: 4, PerNode: 4}, 500},
		{CriticalJob{GPUs: 5, PerNode: 2}, math.MaxInt64}, // not a per-node layout: never
	} {
		if got := c.earliestStart(100, tc.job, []int{3, 1}, rels, nil, 0); got != tc.want {
			t.Errorf("%+v: earliest start %d, want %d", tc.job, got, tc.want)
		}
	}
}
