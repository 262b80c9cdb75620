package planner

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestFit(t *testing.T) {
	c := NewCluster([]Node{{Name: "v0", GPUType: "v100", Total: 4}, {Name: "v1", GPUType: "v100", Total: 4},
		{Name: "a0", GPUType: "a100", Total: 4}}, map[string]float64{"v100": 1, "a100": 2})
	tests := []struct {
		name  string
		avail []int
		want  int
		rule  FitRule
		got   []Alloc
	}{
		{"a job that fits one node goes to the first of the fullest that hold it, whatever their speed", []int{4, 4, 4}, 2, FitRule{}, []Alloc{{0, 2}}},
		{"among nodes that hold it the one with the fewest free GPUs is chosen", []int{4, 2, 0}, 2, FitRule{}, []Alloc{{1, 2}}},
		{"nodes with more free GPUs go first, and each gives all but one for each node after it", []int{3, 4, 1}, 6, FitRule{}, []Alloc{{0, 3}, {1, 3}}},
		{"a job too big for any one type spans types", []int{2, 2, 3}, 6, FitRule{}, []Alloc{{0, 2}, {1, 2}, {2, 2}}},
		{"a one-type job never spans types", []int{2, 2, 3}, 6, FitRule{OneType: true}, nil},
		{"a one-type job that fits several types takes the first node's type when weights are equal", []int{4, 4, 4}, 4, FitRule{OneType: true}, []Alloc{{0, 4}}},
		{"a job that names its type runs only on it", []int{1, 1, 4}, 2, FitRule{Types: []string{"v100"}}, []Alloc{{0, 1}, {1, 1}}},
		{"no allocation when too few GPUs are available", []int{1, 1, 1}, 4, FitRule{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.Fit(tc.avail, tc.want, tc.rule); !reflect.DeepEqual(got, tc.got) {
				t.Errorf("Fit = %v, want %v", got, tc.got)
			}
		})
	}
}

// TestFitFollowsWeightsAndRunsOfOneType: a node of lower weight is taken
// first, for a one-type job too; a node of another type ends a run of the
// type a job names, as a node Slurm may not use ends cons_tres's set.
func TestFitFollowsWeightsAndRunsOfOneType(t *testing.T) {
	mixed := NewCluster([]Node{{GPUType: "v100", Total: 4}, {GPUType: "t4", Total: 4}, {GPUType: "v100", Total: 4},
		{GPUType: "v100", Total: 4}}, map[string]float64{"v100": 3.1, "t4": 1})
	slowFirst := NewCluster([]Node{{GPUType: "v100", Total: 4, Weight: 2}, {GPUType: "t4", Total: 4, Weight: 1}},
		map[string]float64{"v100": 3.1, "t4": 1})
	tests := []struct {
		name  string
		c     *Cluster
		avail []int
		want  int
		rule  FitRule
		got   []Alloc
	}{
		{"a t4 node between v100 nodes ends their run: the two v100 nodes after it are taken", mixed, []int{4, 4, 4, 4}, 8,
			FitRule{Types: []string{"v100"}}, []Alloc{{2, 4}, {3, 4}}},
		{"the same for a one-type job", mixed, []int{4, 4, 4, 4}, 8, FitRule{OneType: true}, []Alloc{{2, 4}, {3, 4}}},
		{"the lighter t4 node is taken first", slowFirst, []int{4, 4}, 2, FitRule{}, []Alloc{{1, 2}}},
		{"a one-type job goes to the lighter type first", slowFirst, []int{4, 4}, 4, FitRule{OneType: true}, []Alloc{{1, 4}}},
		{"a one-type job too big for the lighter type takes the next", slowFirst, []int{4, 2}, 4, FitRule{OneType: true}, []Alloc{{0, 4}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.Fit(tc.avail, tc.want, tc.rule); !reflect.DeepEqual(got, tc.got) {
				t.Errorf("Fit = %v, want %v", got, tc.got)
			}
		})
	}
}

// TestFitPlacesJobsWhereTheLabsSlurmDid replays placements recorded on the
// lab's slurmctld 22.05 (tests/slurm
// TestTheSimulatorPlacesJobsWhereSlurmDoes): nodes n1, n2 with 4 V100 and
// n3, n4 with 4 T4, held GPUs taken by jobs pinned to each node (two CPUs
// per GPU), then one job asking --gpus=N; got is where Slurm put its GPUs.
func TestFitPlacesJobsWhereTheLabsSlurmDid(t *testing.T) {
	c := NewCluster([]Node{{Name: "n1", GPUType: "v100", Total: 4}, {Name: "n2", GPUType: "v100", Total: 4},
		{Name: "n3", GPUType: "t4", Total: 4}, {Name: "n4", GPUType: "t4", Total: 4}}, map[string]float64{"v100": 3.1, "t4": 1})
	tests := []struct {
		held [4]int
		gpus int
		got  [4]int
	}{
		{[4]int{0, 0, 0, 0}, 6, [4]int{4, 2, 0, 0}},
		{[4]int{2, 0, 0, 0}, 6, [4]int{0, 4, 2, 0}}, // a partly busy node ranks below full ones: n1 + n2 would fit
		{[4]int{1, 1, 0, 0}, 6, [4]int{0, 0, 4, 2}}, // the T4s, though the V100s hold it
		{[4]int{0, 1, 1, 0}, 5, [4]int{4, 0, 0, 1}},
		{[4]int{0, 0, 0, 1}, 2, [4]int{0, 0, 0, 2}}, // one node: the fullest that holds it
		{[4]int{2, 2, 2, 2}, 5, [4]int{2, 2, 1, 0}},
		{[4]int{4, 2, 0, 0}, 4, [4]int{0, 0, 4, 0}},
		{[4]int{4, 0, 2, 1}, 3, [4]int{0, 0, 0, 3}},
		{[4]int{3, 0, 3, 2}, 8, [4]int{1, 4, 1, 2}},
		{[4]int{0, 3, 3, 3}, 6, [4]int{4, 1, 1, 0}},
		{[4]int{0, 0, 2, 3}, 3, [4]int{3, 0, 0, 0}},
		{[4]int{0, 2, 4, 3}, 5, [4]int{4, 1, 0, 0}},
		{[4]int{0, 2, 3, 2}, 9, [4]int{4, 2, 1, 2}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("held %v, --gpus=%d", tc.held, tc.gpus), func(t *testing.T) {
			avail := make([]int, 4)
			for i, h := range tc.held {
				avail[i] = 4 - h
			}
			var got [4]int
			for _, a := range c.Fit(avail, tc.gpus, FitRule{}) {
				got[a.Node] += a.GPUs
			}
			if got != tc.got {
				t.Errorf("Fit put the GPUs on n1..n4 as %v, Slurm did %v", got, tc.got)
			}
		})
	}
}

func TestAdmit(t *testing.T) {
	c := NewCluster([]Node{{Name: "n0", GPUType: "v100", Total: 4}, {Name: "n1", GPUType: "v100", Total: 4}}, nil)
	long := Donor{Base: []Alloc{{0, 4}}, Min: 2, TimeLeft: 10000}
	tests := []struct {
		name   string
		req    AdmitRequest
		want   Admission
		wantOK bool
	}{
		{
			name:   "a longer job yields the GPUs a short queued job lacks, down to what is needed",
			req:    AdmitRequest{Avail: []int{0, 0}, Want: 1, Work: 100, Donors: []Donor{long}},
			want:   Admission{Alloc: []Alloc{{0, 1}}, Shrinks: []DonorShrink{{Donor: 0, Node: 0, GPUs: 1}}},
			wantOK: true,
		},
		{
			name: "a job with less time left than the queued job's work never yields",
			req:  AdmitRequest{Avail: []int{0, 0}, Want: 1, Work: 20000, Donors: []Donor{long}},
		},
		{
			name: "a donor never goes below its minimum",
			req:  AdmitRequest{Avail: []int{0, 0}, Want: 3, Work: 100, Donors: []Donor{long}},
		},
		{
			name: "a donor on a node a reservation needs is kept",
			req: AdmitRequest{Avail: []int{0, 0}, Want: 1, Work: 100, Donors: []Donor{long},
				Reserved: reservedAt(map[int]float64{0: 5000}), Limit: 100},
		},
		{
			name: "the job takes free GPUs on a reserved node when its limit ends by the reserved start",
			req: AdmitRequest{Avail: []int{2, 0}, Want: 3, Work: 100, Donors: []Donor{{Base: []Alloc{{1, 4}}, Min: 3, TimeLeft: 99999}},
				Reserved: reservedAt(map[int]float64{0: 100}), Limit: 100},
			want:   Admission{Alloc: []Alloc{{0, 2}, {1, 1}}, Shrinks: []DonorShrink{{Donor: 0, Node: 1, GPUs: 1}}},
			wantOK: true,
		},
		{
			name: "it takes none there when its limit ends after the reserved start",
			req: AdmitRequest{Avail: []int{2, 0}, Want: 3, Work: 100, Donors: []Donor{{Base: []Alloc{{1, 4}}, Min: 3, TimeLeft: 99999}},
				Reserved: reservedAt(map[int]float64{0: 99}), Limit: 100},
		},
		{
			name: "the job's placement may respect other reservations than the donors' (JobReserved)",
			req: AdmitRequest{Avail: []int{2, 0}, Want: 3, Work: 100, Donors: []Donor{{Base: []Alloc{{1, 4}}, Min: 3, TimeLeft: 99999}},
				Reserved: reservedAt(map[int]float64{0: 99}), JobReserved: reservedAt(nil), Limit: 100},
			want:   Admission{Alloc: []Alloc{{0, 2}, {1, 1}}, Shrinks: []DonorShrink{{Donor: 0, Node: 1, GPUs: 1}}},
			wantOK: true,
		},
		{
			name: "it may start up to StartDelay later: it must end by the start then",
			req: AdmitRequest{Avail: []int{2, 0}, Want: 3, Work: 100, Donors: []Donor{{Base: []Alloc{{1, 4}}, Min: 3, TimeLeft: 99999}},
				Reserved: reservedAt(map[int]float64{0: 120}), Limit: 100, StartDelay: 21},
		},
		{
			name: "nor when its limit is not known",
			req: AdmitRequest{Avail: []int{2, 0}, Want: 3, Work: 100, Donors: []Donor{{Base: []Alloc{{1, 4}}, Min: 3, TimeLeft: 99999}},
				Reserved: reservedAt(map[int]float64{0: 1e9})},
		},
		{
			name: "the donor with the most time left yields first",
			req: AdmitRequest{Avail: []int{0, 0}, Want: 2, Work: 100,
				Donors: []Donor{long, {Base: []Alloc{{1, 4}}, Min: 1, TimeLeft: 50000}}},
			want:   Admission{Alloc: []Alloc{{1, 2}}, Shrinks: []DonorShrink{{Donor: 1, Node: 1, GPUs: 2}}},
			wantOK: true,
		},
		{
			name: "with whole nodes a one-node job keeps its node and a two-node job gives up one",
			req: AdmitRequest{Avail: []int{0, 0}, Want: 2, Work: 100, WholeNodes: true,
				Donors: []Donor{{Base: []Alloc{{0, 4}}, Min: 1, TimeLeft: 99999}, {Base: []Alloc{{1, 2}, {0, 2}}, Min: 2, TimeLeft: 9999}}},
			want:   Admission{Alloc: []Alloc{{1, 2}}, Shrinks: []DonorShrink{{Donor: 1, Node: 1, GPUs: 2}}},
			wantOK: true,
		},
		{
			name: "a per-node request (-N2 --gres=gpu:2) takes 2 GPUs on each of two nodes, and the donor gives only 2",
			req: AdmitRequest{Avail: []int{3, 0}, Want: 4, PerNode: 2, Work: 100,
				Donors: []Donor{{Base: []Alloc{{1, 4}}, Min: 0, TimeLeft: 99999}}},
			want:   Admission{Alloc: []Alloc{{0, 2}, {1, 2}}, Shrinks: []DonorShrink{{Donor: 0, Node: 1, GPUs: 2}}},
			wantOK: true,
		},
		{
			name: "the same job asking --gpus=4 goes on the node with more free GPUs, the donor's",
			req: AdmitRequest{Avail: []int{3, 0}, Want: 4, Work: 100,
				Donors: []Donor{{Base: []Alloc{{1, 4}}, Min: 0, TimeLeft: 99999}}},
			want:   Admission{Alloc: []Alloc{{1, 4}}, Shrinks: []DonorShrink{{Donor: 0, Node: 1, GPUs: 4}}},
			wantOK: true,
		},
		{
			name: "a Want that is not a multiple of PerNode is no request",
			req: AdmitRequest{Avail: []int{3, 0}, Want: 5, PerNode: 2, Work: 100,
				Donors: []Donor{{Base: []Alloc{{1, 4}}, Min: 0, TimeLeft: 99999}}},
		},
		{
			name: "with whole nodes a job never gives up its last node",
			req: AdmitRequest{Avail: []int{0, 0}, Want: 4, Work: 100, WholeNodes: true,
				Donors: []Donor{{Base: []Alloc{{0, 4}}, Min: 0, TimeLeft: 99999}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			avail := append([]int(nil), tc.req.Avail...)
			got, ok := c.Admit(tc.req)
			if ok != tc.wantOK || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Admit = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
			if !reflect.DeepEqual(avail, tc.req.Avail) {
				t.Errorf("Admit changed Avail: %v, was %v", tc.req.Avail, avail)
			}
		})
	}
}

func TestRunTime(t *testing.T) {
	m := DefaultModel(4, 2)
	if got := RunTime(m, []SpeedCount{{Speed: 1, N: 2}}, 1000); got < 999.999 || got > 1000.001 {
		t.Errorf("RunTime at the reference size = %v s, want the work, 1000 s", got)
	}
	if got := RunTime(m, nil, 1000); got < 1e308 {
		t.Errorf("RunTime on no GPUs = %v, want +Inf", got)
	}
}

// TestFitKeepsItsPromises: on random clusters and requests, an allocation
// takes exactly the GPUs asked, never more than a node has available,
// only on allowed types (one type for a one-type job), each node once;
// and there is one whenever the allowed nodes hold the request (one type
// for a one-type job).
// randomFit draws a cluster of 1 to 9 nodes of 8 GPUs of three types with
// weights 0 to 2, the GPUs available on each, and a rule: one type or
// not, naming no type, one, or two.
func randomFit(r *rand.Rand) ([]Node, *Cluster, []int, FitRule) {
	types := []string{"v100", "p100", "t4"}
	var nodes []Node
	for range 1 + r.IntN(9) {
		nodes = append(nodes, Node{GPUType: types[r.IntN(3)], Total: 8, Weight: r.IntN(3)})
	}
	c := NewCluster(nodes, map[string]float64{"v100": 3.1, "p100": 2.4})
	avail := make([]int, len(nodes))
	for i := range avail {
		avail[i] = r.IntN(9)
	}
	rule := FitRule{OneType: r.IntN(3) == 0}
	switch r.IntN(4) {
	case 0:
		rule.Types = []string{types[r.IntN(3)]}
	case 1:
		rule.Types = []string{types[r.IntN(3)], types[r.IntN(3)]}
	}
	return nodes, c, avail, rule
}

func TestFitKeepsItsPromises(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for iter := range 2000 {
		nodes, c, avail, rule := randomFit(r)
		want := 1 + r.IntN(30)
		byType := map[string]int{}
		for i, n := range nodes {
			if rule.allows(n.GPUType) {
				byType[n.GPUType] += avail[i]
			}
		}
		holds := false
		sum := 0
		for _, g := range byType {
			holds = holds || g >= want
			sum += g
		}
		if !rule.OneType {
			holds = sum >= want
		}
		got := c.Fit(avail, want, rule)
		if (got != nil) != holds {
			t.Fatalf("iter %d: Fit(%v, %d, %+v) = %v on %v, want an allocation: %v", iter, avail, want, rule, got, nodes, holds)
		}
		total, seen, used := 0, map[int]bool{}, map[string]bool{}
		for _, a := range got {
			if a.GPUs < 1 || a.GPUs > avail[a.Node] || seen[a.Node] || !rule.allows(nodes[a.Node].GPUType) {
				t.Fatalf("iter %d: Fit(%v, %d, %+v) = %v breaks a node's bounds or the rule", iter, avail, want, rule, got)
			}
			seen[a.Node], used[nodes[a.Node].GPUType] = true, true
			total += a.GPUs
		}
		if got != nil && (total != want || (rule.OneType && len(used) != 1)) {
			t.Fatalf("iter %d: Fit(%v, %d, %+v) = %v: %d GPUs on types %v", iter, avail, want, rule, got, total, used)
		}
	}
}

// TestFitFillsInChoiceOrderAsSlurm2411Does: two placements the 24.11 lab
// made with the T4 nodes n3, n4 weighted first (tests/slurm
// TestTheSimulatorPlacesJobsWhereSlurmDoes), where 22.05 chose the same
// nodes but split the GPUs in node order.
func TestFitFillsInChoiceOrderAsSlurm2411Does(t *testing.T) {
	nodes := []Node{{Name: "n1", GPUType: "v100", Total: 4, Weight: 3}, {Name: "n2", GPUType: "v100", Total: 4, Weight: 3},
		{Name: "n3", GPUType: "t4", Total: 4, Weight: 1}, {Name: "n4", GPUType: "t4", Total: 4, Weight: 1}}
	for _, tc := range []struct {
		avail      []int
		gpus       int
		v2205, now [4]int
	}{
		{[]int{4, 3, 3, 4}, 5, [4]int{0, 0, 3, 2}, [4]int{0, 0, 1, 4}},
		{[]int{2, 2, 2, 2}, 5, [4]int{2, 0, 2, 1}, [4]int{1, 0, 2, 2}},
	} {
		for _, inOrder := range []bool{false, true} {
			c := NewCluster(nodes, map[string]float64{"v100": 3.1, "t4": 1})
			c.FillInChoiceOrder = inOrder
			var got [4]int
			for _, a := range c.Fit(tc.avail, tc.gpus, FitRule{}) {
				got[a.Node] += a.GPUs
			}
			want := tc.v2205
			if inOrder {
				want = tc.now
			}
			if got != want {
				t.Errorf("avail %v, --gpus=%d, FillInChoiceOrder %v: Fit gave %v, the lab %v", tc.avail, tc.gpus, inOrder, got, want)
			}
		}
	}
}

// TestFitNodesPlacesJobsWhereTheLabsSlurmDid replays the per-node
// placements the 22.05 lab made (tests/slurm
// TestTheSimulatorPlacesJobsWhereSlurmDoes: jobs holding held[i] GPUs of
// n1..n4, then one asking -N nodes --gres=gpu:perNode) under the three
// weightings it sets.
func TestFitNodesPlacesJobsWhereTheLabsSlurmDid(t *testing.T) {
	type placed struct {
		held           [4]int
		nodes, perNode int
		got            [4]int
	}
	for _, w := range []struct {
		name    string
		weights [4]int
		cases   []placed
	}{
		{"equal weights", [4]int{1, 1, 1, 1}, []placed{
			{[4]int{2, 0, 1, 3}, 1, 2, [4]int{2, 0, 0, 0}}, // one run n1..n3 (n4 lacks 2 free): its node with the fewest free GPUs
			{[4]int{0, 2, 0, 1}, 1, 3, [4]int{3, 0, 0, 0}},
			{[4]int{0, 0, 0, 0}, 2, 3, [4]int{3, 3, 0, 0}},
			{[4]int{1, 3, 0, 0}, 2, 2, [4]int{0, 0, 2, 2}}, // n2 lacks 2 free GPUs: n1 alone is too short a run
			{[4]int{2, 2, 2, 2}, 2, 2, [4]int{2, 2, 0, 0}},
			{[4]int{3, 0, 1, 0}, 3, 1, [4]int{1, 1, 1, 0}},
		}},
		{"the V100 nodes weighted first", [4]int{1, 1, 2, 2}, []placed{
			{[4]int{2, 0, 1, 3}, 1, 2, [4]int{2, 0, 0, 0}},
			{[4]int{0, 2, 0, 1}, 1, 3, [4]int{3, 0, 0, 0}},
			{[4]int{0, 0, 0, 0}, 2, 3, [4]int{3, 3, 0, 0}},
			{[4]int{1, 3, 0, 0}, 2, 2, [4]int{2, 0, 2, 0}}, // n1 from the first tier, then the first T4
			{[4]int{2, 2, 2, 2}, 2, 2, [4]int{2, 2, 0, 0}},
			{[4]int{3, 0, 1, 0}, 3, 1, [4]int{1, 1, 1, 0}},
		}},
		{"the T4 nodes weighted first", [4]int{3, 3, 1, 1}, []placed{
			{[4]int{2, 0, 1, 3}, 1, 2, [4]int{0, 0, 2, 0}},
			{[4]int{0, 2, 0, 1}, 1, 3, [4]int{0, 0, 0, 3}}, // best fit within the T4 run: n4 has 3 free, n3 4
			{[4]int{0, 0, 0, 0}, 2, 3, [4]int{0, 0, 3, 3}},
			{[4]int{1, 3, 0, 0}, 2, 2, [4]int{0, 0, 2, 2}},
			{[4]int{2, 2, 2, 2}, 2, 2, [4]int{0, 0, 2, 2}},
			{[4]int{3, 0, 1, 0}, 3, 1, [4]int{1, 0, 1, 1}},
		}},
	} {
		var nodes []Node
		for i, typ := range []string{"v100", "v100", "t4", "t4"} {
			nodes = append(nodes, Node{Name: fmt.Sprintf("n%d", i+1), GPUType: typ, Total: 4, Weight: w.weights[i]})
		}
		c := NewCluster(nodes, map[string]float64{"v100": 3.1, "t4": 1})
		for _, tc := range w.cases {
			t.Run(fmt.Sprintf("%s, held %v, -N%d --gres=gpu:%d", w.name, tc.held, tc.nodes, tc.perNode), func(t *testing.T) {
				avail := make([]int, 4)
				for i, h := range tc.held {
					avail[i] = 4 - h
				}
				var got [4]int
				for _, a := range c.FitNodes(avail, tc.nodes, tc.perNode, FitRule{}) {
					got[a.Node] += a.GPUs
				}
				if got != tc.got {
					t.Errorf("FitNodes put the GPUs on n1..n4 as %v, Slurm did %v", got, tc.got)
				}
			})
		}
	}
}

func TestFitNodesKeepsItsPromises(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for iter := range 2000 {
		nodes, c, avail, rule := randomFit(r)
		want, perNode := r.IntN(5), r.IntN(9) // 0 of either: no allocation
		eligible := map[string]int{}          // nodes with perNode GPUs free, by type
		all := 0
		for i, n := range nodes {
			if rule.allows(n.GPUType) && avail[i] >= perNode {
				eligible[n.GPUType]++
				all++
			}
		}
		holds := all >= want
		if rule.OneType {
			holds = false
			for _, k := range eligible {
				holds = holds || k >= want
			}
		}
		holds = holds && want > 0 && perNode > 0
		got := c.FitNodes(avail, want, perNode, rule)
		if (got != nil) != holds {
			t.Fatalf("iter %d: FitNodes(%v, %d, %d, %+v) = %v on %v, want an allocation: %v", iter, avail, want, perNode, rule, got, nodes, holds)
		}
		seen, used := map[int]bool{}, map[string]bool{}
		for _, a := range got {
			if a.GPUs != perNode || a.GPUs > avail[a.Node] || seen[a.Node] || !rule.allows(nodes[a.Node].GPUType) {
				t.Fatalf("iter %d: FitNodes(%v, %d, %d, %+v) = %v breaks a node's bounds or the rule", iter, avail, want, perNode, rule, got)
			}
			seen[a.Node], used[nodes[a.Node].GPUType] = true, true
		}
		if got != nil && (len(got) != want || (rule.OneType && len(used) != 1)) {
			t.Fatalf("iter %d: FitNodes(%v, %d, %d, %+v) = %v: %d nodes on types %v", iter, avail, want, perNode, rule, got, len(got), used)
		}
	}
}

// Slurm places a per-node request (-N2 --gres=gpu:2) only on nodes with 2
// GPUs free, and the same 4 GPUs asked per job (--gpus=4) on the node with
// the most free first (select/cons_tres, checked on the lab).
func ExampleCluster_Place() {
	c := NewCluster([]Node{{Name: "n1", GPUType: "v100", Total: 4}, {Name: "n2", GPUType: "v100", Total: 4},
		{Name: "n3", GPUType: "v100", Total: 4}}, nil)
	avail := []int{2, 1, 4} // free GPUs on n1, n2, n3
	for _, perNode := range []int{2, 0} {
		fmt.Print("perNode ", perNode, ":")
		for _, a := range c.Place(avail, 4, perNode, FitRule{}) {
			fmt.Printf(" %s×%d", c.Nodes[a.Node].Name, a.GPUs)
		}
		fmt.Println()
	}
	// Output:
	// perNode 2: n1×2 n3×2
	// perNode 0: n3×4
}

// reservedAt is an AdmitRequest.Reserved over a table of starts by node.
func reservedAt(starts map[int]float64) func(int) (float64, bool) {
	return func(n int) (float64, bool) { at, ok := starts[n]; return at, ok }
}

// TestStartsFirst: a job ranked ahead takes the freed GPUs only when it
// fits on them with the idle ones and did not fit on the idle ones alone.
func TestStartsFirst(t *testing.T) {
	c := NewCluster([]Node{{Name: "v0", GPUType: "v100", Total: 4}, {Name: "t0", GPUType: "t4", Total: 4}}, nil)
	for _, tc := range []struct {
		name          string
		before, after []int
		gpus, perNode int
		rule          FitRule
		want          bool
	}{
		{"fits only with the freed GPUs", []int{2, 0}, []int{4, 0}, 4, 0, FitRule{}, true},
		{"fitted on the idle GPUs already", []int{4, 0}, []int{4, 2}, 4, 0, FitRule{}, false},
		{"does not fit even then", []int{1, 0}, []int{3, 0}, 4, 0, FitRule{}, false},
		{"freed GPUs of a type it may not use", []int{2, 0}, []int{2, 2}, 4, 0, FitRule{Types: []string{"v100"}}, false},
		{"freed GPUs spread across types, one-type job", []int{2, 0}, []int{2, 2}, 4, 0, FitRule{OneType: true}, false},
		{"any type: spread over both", []int{2, 0}, []int{2, 2}, 4, 0, FitRule{}, true},
		{"per node: needs one whole node", []int{2, 2}, []int{4, 2}, 4, 4, FitRule{}, true},
		{"per node: two half nodes do not hold it", []int{2, 0}, []int{2, 2}, 4, 4, FitRule{}, false},
	} {
		if got := c.StartsFirst(tc.before, tc.after, tc.gpus, tc.perNode, tc.rule); got != tc.want {
			t.Errorf("%s: StartsFirst(%v, %v, %d, %d) = %v, want %v", tc.name, tc.before, tc.after, tc.gpus, tc.perNode, got, tc.want)
		}
	}
}
