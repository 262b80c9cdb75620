package planner

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func elastic(id, user string, base []NodeGPUs, minG, maxG, logical, ref int) RunningJob {
	return RunningJob{ID: id, User: user, Elastic: true, Base: base, MinGPUs: minG, MaxGPUs: maxG,
		Model: DefaultModel(logical, ref), End: 100000}
}

func TestPlanTable(t *testing.T) {
	speeds := map[string]float64{"v100": 1, "p100": 0.25}
	node := func(name, typ string, total, idle int) Node {
		return Node{Name: name, GPUType: typ, Total: total, Idle: idle}
	}
	lim := Limits{MarginSeconds: 30, MinLendSeconds: 60, MaxLendSeconds: 3600}
	tests := []struct {
		name string
		snap Snapshot
		want Actions
	}{
		{
			name: "an elastic job grows into idle GPUs of a node with no reservation until the maximum lend",
			snap: Snapshot{Now: 1000, Nodes: []Node{node("a", "v100", 4, 2), node("b", "v100", 4, 4)},
				Running: []RunningJob{elastic("1", "u", []NodeGPUs{{"a", 2}}, 1, 4, 4, 2)}, Speeds: speeds, Limits: lim},
			want: Actions{Grows: []Grow{{Job: "1", Node: "a", GPUType: "v100", GPUs: 2, End: 4600, TimeLimit: 3600}}},
		},
		{
			name: "a grow ends the margin before the reserved start that needs its GPUs",
			snap: Snapshot{Now: 1000, Nodes: []Node{node("a", "v100", 2, 1)},
				Running: []RunningJob{elastic("1", "u", []NodeGPUs{{"a", 1}}, 1, 2, 2, 1)},
				Pending: []PendingJob{{ID: "9", PlannedStart: 2000, PlannedNodes: []NodeGPUs{{"a", 0}}}},
				Speeds:  speeds, Limits: lim},
			want: Actions{Grows: []Grow{{Job: "1", Node: "a", GPUType: "v100", GPUs: 1, End: 1970, TimeLimit: 970}}},
		},
		{
			name: "GPUs reserved sooner than the minimum lend are not lent",
			snap: Snapshot{Now: 1000, Nodes: []Node{node("a", "v100", 2, 1)},
				Running: []RunningJob{elastic("1", "u", []NodeGPUs{{"a", 1}}, 1, 2, 2, 1)},
				Pending: []PendingJob{{ID: "9", PlannedStart: 1050, PlannedNodes: []NodeGPUs{{"a", 1}}}},
				Speeds:  speeds, Limits: lim},
			want: Actions{},
		},
		{
			name: "an extra job running past a new reservation is shrunk the margin before it",
			snap: Snapshot{Now: 1000, Nodes: []Node{node("a", "v100", 2, 0)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", []NodeGPUs{{"a", 1}}, 1, 2, 2, 1)
					j.Extras = []Extra{{ID: "x1", Node: "a", GPUs: 1, End: 5000}}
					return j
				}()},
				Pending: []PendingJob{{ID: "9", PlannedStart: 2000, PlannedNodes: []NodeGPUs{{"a", 1}}}},
				Speeds:  speeds, Limits: lim},
			want: Actions{Shrinks: []Shrink{{Job: "1", Extra: "x1", Node: "a", Deadline: 1970, Reservation: 2000}}},
		},
		{
			name: "an extra job is not shrunk when a rigid job's end frees enough GPUs in time",
			snap: Snapshot{Now: 1000, Nodes: []Node{node("a", "v100", 2, 0), node("b", "v100", 1, 0)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", nil, 1, 2, 2, 1)
					j.Base = []NodeGPUs{{"b", 1}}
					j.Extras = []Extra{{ID: "x1", Node: "a", GPUs: 1, End: 5000}}
					return j
				}(), {ID: "r", Base: []NodeGPUs{{"a", 1}}, End: 1500}},
				Pending: []PendingJob{{ID: "9", PlannedStart: 2000, PlannedNodes: []NodeGPUs{{"a", 1}}}},
				Speeds:  speeds, Limits: lim},
			want: Actions{},
		},
		{
			name: "a job never grows beyond its maximum",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 8, 6)},
				Running: []RunningJob{elastic("1", "u", []NodeGPUs{{"a", 2}}, 1, 3, 6, 3)}, Speeds: speeds, Limits: lim},
			want: Actions{Grows: []Grow{{Job: "1", Node: "a", GPUType: "v100", GPUs: 1, End: 3600, TimeLimit: 3600}}},
		},
		{
			name: "a job at most doubles in one round",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 8, 6)},
				Running: []RunningJob{elastic("1", "u", []NodeGPUs{{"a", 2}}, 1, 8, 8, 2)}, Speeds: speeds, Limits: lim},
			want: Actions{Grows: []Grow{{Job: "1", Node: "a", GPUType: "v100", GPUs: 2, End: 3600, TimeLimit: 3600}}},
		},
		{
			name: "a rigid job never grows",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 8, 6)},
				Running: []RunningJob{{ID: "r", Base: []NodeGPUs{{"a", 2}}, MinGPUs: 2, MaxGPUs: 8, Model: DefaultModel(4, 2)}},
				Speeds:  speeds, Limits: lim},
			want: Actions{},
		},
		{
			name: "the per-user limit caps the GPUs lent to one user",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 8, 4)},
				Running: []RunningJob{elastic("1", "u", []NodeGPUs{{"a", 2}}, 1, 4, 4, 2), elastic("2", "u", []NodeGPUs{{"a", 2}}, 1, 4, 4, 2)},
				Speeds:  speeds, Limits: Limits{MaxExtraGPUsPerUser: 2}},
			want: Actions{Grows: []Grow{{Job: "1", Node: "a", GPUType: "v100", GPUs: 2, End: 3600, TimeLimit: 3600}}},
		},
		{
			name: "the GPU goes to the job with the larger marginal throughput",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 3, 1)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", []NodeGPUs{{"a", 1}}, 1, 2, 2, 1)
					j.Model.SyncAlpha = 0.5
					return j
				}(), elastic("2", "w", []NodeGPUs{{"a", 1}}, 1, 2, 2, 1)},
				Speeds: speeds, Limits: lim},
			want: Actions{Grows: []Grow{{Job: "2", Node: "a", GPUType: "v100", GPUs: 1, End: 3600, TimeLimit: 3600}}},
		},
		{
			name: "among equal gains the GPU goes to the job whose time limit ends first",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 3, 1)},
				Running: []RunningJob{elastic("1", "u", []NodeGPUs{{"a", 1}}, 1, 2, 2, 1), func() RunningJob {
					j := elastic("2", "u", []NodeGPUs{{"a", 1}}, 1, 2, 2, 1)
					j.End = 5000
					return j
				}()},
				Speeds: speeds, Limits: lim},
			want: Actions{Grows: []Grow{{Job: "2", Node: "a", GPUType: "v100", GPUs: 1, End: 3600, TimeLimit: 3600}}},
		},
		{
			name: "an extra job being shrunk still counts against the maximum until its deadline",
			snap: Snapshot{Now: 1000, Nodes: []Node{node("a", "v100", 2, 0), node("b", "v100", 4, 4)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", []NodeGPUs{{"a", 1}}, 1, 2, 2, 1)
					j.Extras = []Extra{{ID: "x1", Node: "a", GPUs: 1, End: 9000}}
					return j
				}()},
				Pending: []PendingJob{{ID: "9", PlannedStart: 2000, PlannedNodes: []NodeGPUs{{"a", 2}}}},
				Speeds:  speeds, Limits: lim},
			want: Actions{Shrinks: []Shrink{{Job: "1", Extra: "x1", Node: "a", Deadline: 1970, Reservation: 2000}}},
		},
		{
			name: "a slow GPU that would idle beyond the waste cap is refused",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 1, 0), node("b", "p100", 4, 4)},
				Running: []RunningJob{elastic("1", "u", []NodeGPUs{{"a", 1}}, 1, 2, 2, 1)},
				Speeds:  speeds, Limits: lim},
			want: Actions{},
		},
		{
			name: "a d1 job grows only onto the GPU type it runs on, even when another type is faster",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "p100", 4, 2), node("b", "v100", 4, 4)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", []NodeGPUs{{"a", 2}}, 1, 4, 4, 2)
					j.GPUTypes = AllowedTypes(false, []string{"p100"})
					return j
				}()}, Speeds: speeds, Limits: lim},
			want: Actions{Grows: []Grow{{Job: "1", Node: "a", GPUType: "p100", GPUs: 2, End: 3600, TimeLimit: 3600}}},
		},
		{
			name: "a d2 job may grow onto another GPU type",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 2, 0), node("c", "p100", 4, 4)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", []NodeGPUs{{"a", 2}}, 1, 4, 4, 2)
					j.GPUTypes = AllowedTypes(true, []string{"v100"})
					return j
				}()}, Speeds: map[string]float64{"v100": 1, "p100": 1}, Limits: lim},
			want: Actions{Grows: []Grow{{Job: "1", Node: "c", GPUType: "p100", GPUs: 2, End: 3600, TimeLimit: 3600}}},
		},
		{
			name: "a d1 job does not grow when only another GPU type is idle",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 2, 0), node("c", "p100", 4, 4)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", []NodeGPUs{{"a", 2}}, 1, 4, 4, 2)
					j.GPUTypes = AllowedTypes(false, []string{"v100", "v100"})
					return j
				}()}, Speeds: map[string]float64{"v100": 1, "p100": 1}, Limits: lim},
			want: Actions{},
		},
		{
			name: "a grow ends the margin before its job and its time limit is rounded down to whole minutes",
			snap: Snapshot{Now: 1000, Nodes: []Node{node("a", "v100", 4, 2)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", []NodeGPUs{{"a", 2}}, 1, 4, 4, 2)
					j.End = 1000 + 1799
					return j
				}()}, Speeds: speeds, Limits: Limits{MarginSeconds: 30, MinLendSeconds: 60, MaxLendSeconds: 3600, TimeLimitUnit: 60}},
			want: Actions{Grows: []Grow{{Job: "1", Node: "a", GPUType: "v100", GPUs: 2, End: 1000 + 1740, TimeLimit: 1740}}},
		},
		{
			// The lab's case: a job's end a whole number of minutes away. An
			// extra job whose limit ran to the end exactly started 0.4 s
			// later and outlived its job.
			name: "a grow whose job ends a whole number of minutes away still ends the margin before it",
			snap: Snapshot{Now: 1000, Nodes: []Node{node("a", "v100", 4, 2)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", []NodeGPUs{{"a", 2}}, 1, 4, 4, 2)
					j.End = 1000 + 300
					return j
				}()}, Speeds: speeds, Limits: Limits{MarginSeconds: 60, MinLendSeconds: 60, MaxLendSeconds: 3600, TimeLimitUnit: 60}},
			want: Actions{Grows: []Grow{{Job: "1", Node: "a", GPUType: "v100", GPUs: 2, End: 1000 + 240, TimeLimit: 240}}},
		},
		{
			name: "a grow that rounding leaves shorter than the minimum lend is dropped",
			snap: Snapshot{Now: 1000, Nodes: []Node{node("a", "v100", 4, 2)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", []NodeGPUs{{"a", 2}}, 1, 4, 4, 2)
					j.End = 1000 + 119
					return j
				}()}, Speeds: speeds, Limits: Limits{MinLendSeconds: 60, TimeLimitUnit: 60}},
			want: Actions{Grows: []Grow{{Job: "1", Node: "a", GPUType: "v100", GPUs: 2, End: 1060, TimeLimit: 60}}},
		},
		{
			name: "a job's extra jobs spread onto an idle node instead of stacking on the one it already uses",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 4, 0), node("b", "v100", 4, 2), node("c", "v100", 4, 4)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", []NodeGPUs{{"a", 4}}, 1, 8, 8, 4)
					j.Extras = []Extra{{ID: "x1", Node: "b", GPUs: 2, End: 3600}}
					return j
				}()}, Speeds: speeds, Limits: lim},
			want: Actions{Grows: []Grow{{Job: "1", Node: "c", GPUType: "v100", GPUs: 2, End: 3600, TimeLimit: 3600}}},
		},
		{
			name: "grows of one job on one node merge into one extra job ending at the earlier end",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 4, 2)},
				Running: []RunningJob{elastic("1", "u", []NodeGPUs{{"a", 2}}, 1, 4, 4, 2)},
				Pending: []PendingJob{{ID: "9", PlannedStart: 2000, PlannedNodes: []NodeGPUs{{"a", 1}}}},
				Speeds:  speeds, Limits: lim},
			want: Actions{Grows: []Grow{{Job: "1", Node: "a", GPUType: "v100", GPUs: 2, End: 1970, TimeLimit: 1970}}},
		},
		{
			name: "a job whose lends keep failing (NoGrow) is not grown and the GPUs go to another job",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 4, 2)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", []NodeGPUs{{"a", 1}}, 1, 4, 4, 1)
					j.NoGrow = true
					return j
				}(), elastic("2", "w", []NodeGPUs{{"a", 1}}, 1, 2, 2, 1)},
				Speeds: speeds, Limits: lim},
			want: Actions{Grows: []Grow{{Job: "2", Node: "a", GPUType: "v100", GPUs: 1, End: 3600, TimeLimit: 3600}}},
		},
		{
			name: "a held job's extra jobs are still shrunk before a reservation",
			snap: Snapshot{Now: 1000, Nodes: []Node{node("a", "v100", 2, 0)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", []NodeGPUs{{"a", 1}}, 1, 2, 2, 1)
					j.Extras = []Extra{{ID: "x1", Node: "a", GPUs: 1, End: 5000}}
					j.NoGrow = true
					return j
				}()},
				Pending: []PendingJob{{ID: "9", PlannedStart: 2000, PlannedNodes: []NodeGPUs{{"a", 1}}}},
				Speeds:  speeds, Limits: lim},
			want: Actions{Shrinks: []Shrink{{Job: "1", Extra: "x1", Node: "a", Deadline: 1970, Reservation: 2000}}},
		},
		{
			name: "a job is not grown onto a node in backoff (NoGrowNodes) but onto another",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 4, 0), node("b", "v100", 4, 4), node("c", "v100", 4, 4)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", []NodeGPUs{{"a", 4}}, 1, 8, 8, 4)
					j.NoGrowNodes = []string{"b", "gone"}
					return j
				}()}, Speeds: speeds, Limits: lim},
			want: Actions{Grows: []Grow{{Job: "1", Node: "c", GPUType: "v100", GPUs: 4, End: 3600, TimeLimit: 3600}}},
		},
		{
			name: "a job is not grown onto a node its owner excluded (OffNodes) but onto another",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 4, 0), node("b", "v100", 4, 4), node("c", "v100", 4, 4)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", []NodeGPUs{{"a", 4}}, 1, 8, 8, 4)
					j.OffNodes = []string{"b", "gone"}
					return j
				}()}, Speeds: speeds, Limits: lim},
			want: Actions{Grows: []Grow{{Job: "1", Node: "c", GPUType: "v100", GPUs: 4, End: 3600, TimeLimit: 3600}}},
		},
		{
			name: "a job whose only idle node is in backoff is not grown",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 4, 0), node("b", "v100", 4, 4)},
				Running: []RunningJob{func() RunningJob {
					j := elastic("1", "u", []NodeGPUs{{"a", 4}}, 1, 8, 8, 4)
					j.NoGrowNodes = []string{"b"}
					return j
				}()}, Speeds: speeds, Limits: lim},
			want: Actions{},
		},
		{
			name: "GPUs a running job holds are not lent though the node's own count, read earlier, says idle",
			snap: Snapshot{Now: 0, Nodes: []Node{node("a", "v100", 4, 0), node("b", "v100", 4, 4), node("c", "v100", 4, 4)},
				Running: []RunningJob{elastic("1", "u", []NodeGPUs{{"a", 4}}, 1, 8, 8, 4),
					{ID: "r", Base: []NodeGPUs{{"b", 4}}, End: 7200}},
				Speeds: speeds, Limits: lim},
			want: Actions{Grows: []Grow{{Job: "1", Node: "c", GPUType: "v100", GPUs: 4, End: 3600, TimeLimit: 3600}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Plan(tc.snap)
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Plan = %+v\nwant  %+v", got, tc.want)
			}
		})
	}
}

func TestFreeGPUsIsTheSmallerOfTheNodesCountAndWhatNoListedJobHolds(t *testing.T) {
	nodes := []Node{{Name: "a", GPUType: "v100", Total: 4, Idle: 2}, {Name: "b", GPUType: "v100", Total: 4, Idle: 4}}
	tests := []struct {
		name    string
		running []RunningJob
		want    []int
	}{
		{"no job listed: the nodes' own counts", nil, []int{2, 4}},
		{"accounts that agree are kept", []RunningJob{{ID: "r", Base: []NodeGPUs{{"a", 2}}}}, []int{2, 4}},
		{"a job listed on GPUs the node counts idle takes them", []RunningJob{{ID: "r", Base: []NodeGPUs{{"a", 1}, {"b", 3}}}}, []int{2, 1}},
		{"extra jobs, started or not, hold their GPUs",
			[]RunningJob{{ID: "e", Base: []NodeGPUs{{"a", 1}}, Extras: []Extra{{ID: "x", Node: "b", GPUs: 2}}}}, []int{2, 2}},
		{"more held than the node has gives 0, never less", []RunningJob{{ID: "r", Base: []NodeGPUs{{"b", 4}}},
			{ID: "s", Base: []NodeGPUs{{"b", 2}}}}, []int{2, 0}},
		{"nodes the snapshot does not list are ignored", []RunningJob{{ID: "r", Base: []NodeGPUs{{"z", 4}}}}, []int{2, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{Nodes: nodes, Running: tc.running}
			idx, err := IndexNodes(nodes)
			if err != nil {
				t.Fatal(err)
			}
			if got := FreeGPUs(&s, idx); !slices.Equal(got, tc.want) {
				t.Errorf("FreeGPUs = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlanRejectsInvalidSnapshots(t *testing.T) {
	ok := func() Snapshot {
		return Snapshot{Nodes: []Node{{Name: "a", GPUType: "v100", Total: 2, Idle: 1}},
			Running: []RunningJob{elastic("1", "u", []NodeGPUs{{"a", 1}}, 1, 2, 2, 1)},
			Speeds:  map[string]float64{"v100": 1}}
	}
	tests := []struct {
		name   string
		break_ func(*Snapshot)
	}{
		{"a GPU type without a speed is rejected", func(s *Snapshot) { s.Speeds = nil }},
		{"more idle than total GPUs is rejected", func(s *Snapshot) { s.Nodes[0].Idle = 3 }},
		{"a node listed twice is rejected", func(s *Snapshot) { s.Nodes = append(s.Nodes, s.Nodes[0]) }},
		{"a minimum above the maximum is rejected", func(s *Snapshot) { s.Running[0].MinGPUs = 3 }},
		{"an extra job on an unknown node is rejected", func(s *Snapshot) {
			s.Running[0].Extras = []Extra{{ID: "x", Node: "zz", GPUs: 1}}
		}},
		{"a throughput model without logical workers is rejected", func(s *Snapshot) { s.Running[0].Model.LogicalWorkers = 0 }},
		{"a NaN sync cost is rejected", func(s *Snapshot) { s.Running[0].Model.SyncAlpha = math.NaN() }},
	}
	if _, err := Plan(ok()); err != nil {
		t.Fatalf("valid snapshot rejected: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ok()
			tc.break_(&s)
			if _, err := Plan(s); !errors.Is(err, ErrInvalidSnapshot) {
				t.Errorf("Plan err = %v, want ErrInvalidSnapshot", err)
			}
		})
	}
}

// randomSnapshot builds a consistent snapshot: base and extra allocations
// never exceed a node's non-idle GPUs.
func randomSnapshot(r *rand.Rand) Snapshot {
	types := []string{"a100", "v100", "t4"}
	s := Snapshot{Now: 10000, Speeds: map[string]float64{"a100": 2, "v100": 1, "t4": 0.5},
		Limits: Limits{MarginSeconds: int64(r.IntN(120)), MinLendSeconds: 60, MaxLendSeconds: 7200,
			MaxExtraGPUsPerUser: r.IntN(3) * 8, MaxExtraGPUsPerJob: r.IntN(3) * 4, TimeLimitUnit: []int64{0, 60}[r.IntN(2)]}}
	nNodes := 1 + r.IntN(12)
	used := make([]int, nNodes)
	for i := range nNodes {
		s.Nodes = append(s.Nodes, Node{Name: string(rune('a'+i)) + "n", GPUType: types[r.IntN(3)], Total: 1 + r.IntN(8)})
	}
	nJobs := r.IntN(10)
	for j := range nJobs {
		job := RunningJob{ID: string(rune('A' + j)), User: string(rune('u' + r.IntN(3))), Elastic: r.IntN(4) > 0,
			End: s.Now + int64(r.IntN(20000)) - 2000}
		for range 1 + r.IntN(3) {
			ni := r.IntN(nNodes)
			if free := s.Nodes[ni].Total - used[ni]; free > 0 {
				g := 1 + r.IntN(free)
				used[ni] += g
				job.Base = append(job.Base, NodeGPUs{s.Nodes[ni].Name, g})
			}
		}
		base := 0
		for _, b := range job.Base {
			base += b.GPUs
		}
		if base == 0 {
			continue
		}
		if job.Elastic {
			for x := range r.IntN(3) {
				ni := r.IntN(nNodes)
				if free := s.Nodes[ni].Total - used[ni]; free > 0 {
					g := 1 + r.IntN(free)
					used[ni] += g
					job.Extras = append(job.Extras, Extra{ID: job.ID + "x" + string(rune('0'+x)), Node: s.Nodes[ni].Name, GPUs: g,
						End: s.Now + int64(r.IntN(8000))})
				}
			}
			job.MinGPUs = 1 + r.IntN(base)
			ref := 1 + r.IntN(8)
			job.MaxGPUs = base + r.IntN(16)
			job.Model = DefaultModel(ref*(1+r.IntN(2)), ref)
			if r.IntN(2) == 0 { // d1: only the types of its own nodes
				var types []string
				for _, b := range job.Base {
					for _, n := range s.Nodes {
						if n.Name == b.Node {
							types = append(types, n.GPUType)
						}
					}
				}
				job.GPUTypes = AllowedTypes(false, types)
			}
		}
		if job.Elastic && r.IntN(6) == 0 {
			job.NoGrow = true
		}
		if job.Elastic && r.IntN(4) == 0 {
			job.NoGrowNodes = []string{s.Nodes[r.IntN(nNodes)].Name}
		}
		if job.Elastic && r.IntN(4) == 0 {
			job.OffNodes = []string{s.Nodes[r.IntN(nNodes)].Name}
		}
		s.Running = append(s.Running, job)
	}
	for i := range s.Nodes {
		s.Nodes[i].Idle = s.Nodes[i].Total - used[i]
	}
	for p := range r.IntN(8) {
		pj := PendingJob{ID: "p" + string(rune('0'+p))}
		if r.IntN(4) > 0 {
			pj.PlannedStart = s.Now + int64(r.IntN(6000)) - 100
			for range 1 + r.IntN(2) {
				pj.PlannedNodes = append(pj.PlannedNodes, NodeGPUs{s.Nodes[r.IntN(nNodes)].Name, r.IntN(4)})
			}
		}
		s.Pending = append(s.Pending, pj)
	}
	return s
}

// TestPlanProperties checks the planner's invariants on random snapshots:
// no GPU is given twice, min and max and doubling hold, every grow and
// shrink leaves reserved starts undelayed, and grown jobs stay within the
// waste cap.
func TestPlanProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	grows, shrinks := 0, 0
	for iter := range 3000 {
		s := randomSnapshot(r)
		a, err := Plan(s)
		if err != nil {
			t.Fatalf("snapshot %d: %v", iter, err)
		}
		grows += len(a.Grows)
		shrinks += len(a.Shrinks)
		checkPlan(t, iter, s, a)
	}
	if grows == 0 || shrinks == 0 {
		t.Fatalf("random snapshots exercised %d grows and %d shrinks; want both > 0", grows, shrinks)
	}
}

func checkPlan(t *testing.T, iter int, s Snapshot, a Actions) {
	t.Helper()
	lim := s.Limits.withDefaults()
	nodeOf := map[string]Node{}
	for _, n := range s.Nodes {
		nodeOf[n.Name] = n
	}
	lentOnNode := map[string]int{}
	jobGrow := map[string]map[string]int{}
	jobOf := map[string]RunningJob{}
	for _, j := range s.Running {
		jobOf[j.ID] = j
	}
	onNode := map[[2]string]bool{}
	for _, g := range a.Grows {
		j := jobOf[g.Job]
		if j.NoGrow || slices.Contains(j.NoGrowNodes, g.Node) || slices.Contains(j.OffNodes, g.Node) {
			t.Errorf("snapshot %d: grow %+v of a job held (%v) or onto a node it is held from (%v) or may not run on (%v)",
				iter, g, j.NoGrow, j.NoGrowNodes, j.OffNodes)
		}
		if len(j.GPUTypes) > 0 && !slices.Contains(j.GPUTypes, g.GPUType) {
			t.Errorf("snapshot %d: grow %+v onto a type job %s may not use (%v)", iter, g, j.ID, j.GPUTypes)
		}
		if j.End > 0 && g.End > j.End-lim.MarginSeconds {
			t.Errorf("snapshot %d: grow %+v ends later than the margin before its job's end %d", iter, g, j.End)
		}
		if u := lim.TimeLimitUnit; u > 1 && g.TimeLimit%u != 0 {
			t.Errorf("snapshot %d: grow %+v time limit is not a whole number of %d s", iter, g, u)
		}
		if onNode[[2]string{g.Job, g.Node}] {
			t.Errorf("snapshot %d: two grows of job %s on node %s: want one extra job", iter, g.Job, g.Node)
		}
		onNode[[2]string{g.Job, g.Node}] = true
		lentOnNode[g.Node] += g.GPUs
		if g.End-s.Now < lim.MinLendSeconds || g.End > s.Now+lim.MaxLendSeconds || g.TimeLimit != g.End-s.Now {
			t.Errorf("snapshot %d: grow %+v has a time limit outside [min lend, max lend]", iter, g)
		}
		if nodeOf[g.Node].GPUType != g.GPUType {
			t.Errorf("snapshot %d: grow %+v names the wrong GPU type", iter, g)
		}
		if jobGrow[g.Job] == nil {
			jobGrow[g.Job] = map[string]int{}
		}
		jobGrow[g.Job][g.GPUType] += g.GPUs
	}
	for n, c := range lentOnNode {
		if c > nodeOf[n].Idle {
			t.Errorf("snapshot %d: %d GPUs lent on node %s with %d idle: a GPU given twice", iter, c, n, nodeOf[n].Idle)
		}
	}
	shrunk := map[string]int64{}
	for _, sh := range a.Shrinks {
		if sh.Deadline < s.Now || sh.Deadline > max(s.Now, sh.Reservation-lim.MarginSeconds) {
			t.Errorf("snapshot %d: shrink %+v deadline outside [now, reservation − margin]", iter, sh)
		}
		shrunk[sh.Extra] = sh.Deadline
	}
	// Rebuild every extra job's end after the plan and check each reservation.
	type alloc struct {
		node  string
		gpus  int
		end   int64
		extra bool
	}
	var allocs []alloc
	userLent := map[string]int{}
	for _, j := range s.Running {
		total, base, lent := 0, 0, 0
		byType := map[string]int{}
		for _, b := range j.Base {
			allocs = append(allocs, alloc{b.Node, b.GPUs, j.End, false})
			base += b.GPUs
			byType[nodeOf[b.Node].GPUType] += b.GPUs
		}
		leaving := 0
		for _, x := range j.Extras {
			end := x.End
			if d, ok := shrunk[x.ID]; ok {
				end = d - lim.MarginSeconds
				leaving += x.GPUs
			} else {
				lent += x.GPUs
				byType[nodeOf[x.Node].GPUType] += x.GPUs
			}
			allocs = append(allocs, alloc{x.Node, x.GPUs, end, true})
		}
		total = base + lent
		grown := 0
		for typ, c := range jobGrow[j.ID] {
			grown += c
			byType[typ] += c
		}
		if grown == 0 {
			continue
		}
		if !j.Elastic {
			t.Errorf("snapshot %d: rigid job %s grew", iter, j.ID)
		}
		if total+leaving+grown > j.MaxGPUs || grown > total {
			t.Errorf("snapshot %d: job %s had %d GPUs (%d more being shrunk), grew by %d, max %d: max or doubling violated",
				iter, j.ID, total, leaving, grown, j.MaxGPUs)
		}
		// GPUs being shrunk are held until their deadline: they count
		// toward both caps.
		if l := lim.MaxExtraGPUsPerJob; l > 0 && lent+leaving+grown > l {
			t.Errorf("snapshot %d: job %s holds %d lent GPUs (%d being shrunk) over the per-job limit %d", iter, j.ID, lent+leaving+grown, leaving, l)
		}
		userLent[j.User] += lent + leaving + grown
		var sc []SpeedCount
		for typ, c := range byType {
			sc = append(sc, SpeedCount{s.Speeds[typ], c})
		}
		if _, waste := j.Model.Throughput(sc); waste > lim.WasteCap+1e-9 {
			t.Errorf("snapshot %d: job %s grown to waste %.3f over the cap", iter, j.ID, waste)
		}
	}
	for _, g := range a.Grows {
		allocs = append(allocs, alloc{g.Node, g.GPUs, g.End, true})
	}
	if l := lim.MaxExtraGPUsPerUser; l > 0 {
		for u, c := range userLent {
			grewUser := false
			for _, j := range s.Running {
				if j.User == u && len(jobGrow[j.ID]) > 0 {
					grewUser = true
				}
			}
			if grewUser && c > l {
				t.Errorf("snapshot %d: user %s holds %d lent GPUs over the limit %d", iter, u, c, l)
			}
		}
	}
	for _, p := range s.Pending {
		if p.PlannedStart <= 0 {
			continue
		}
		for _, pn := range p.PlannedNodes {
			n := nodeOf[pn.Node]
			t0 := max(p.PlannedStart, s.Now)
			surplus := n.Idle - lentOnNode[n.Name]
			blocking := false
			for _, al := range allocs {
				if al.node != n.Name {
					continue
				}
				rel := al.end
				if al.extra {
					rel += lim.MarginSeconds
				}
				if al.end > 0 && rel <= t0 {
					surplus += al.gpus
				} else if al.extra {
					blocking = true
				}
			}
			for _, q := range s.Pending {
				for _, qn := range q.PlannedNodes {
					if qn.Node == n.Name && q.PlannedStart > 0 && max(q.PlannedStart, s.Now) <= t0 {
						g := qn.GPUs
						if g == 0 || g > n.Total {
							g = n.Total
						}
						surplus -= g
					}
				}
			}
			if surplus < 0 && blocking {
				t.Errorf("snapshot %d: reservation of %s at %d on %s short of %d GPUs while lent GPUs remain", iter, p.ID, t0, n.Name, -surplus)
			}
		}
	}
}
