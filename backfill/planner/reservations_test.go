package planner

import (
	"fmt"
	"maps"
	"testing"
)

func TestReservations(t *testing.T) {
	type add struct {
		job   string
		start int64
		nodes []string
	}
	tests := []struct {
		name      string
		adds      []add
		drop      []string
		job       string
		others    map[string]int64
		jobNodes  []string
		plannedBy int
	}{
		{name: "nothing planned", job: "a", others: map[string]int64{}},
		{name: "a job's own plan is not among the others'",
			adds: []add{{"a", 100, []string{"n1"}}}, job: "a",
			others: map[string]int64{}, jobNodes: []string{"n1"}, plannedBy: 1},
		{name: "the earliest start of the others on each node",
			adds: []add{{"a", 300, []string{"n1", "n2"}}, {"b", 100, []string{"n1"}}, {"d", 50, []string{"n2", "n3"}}}, job: "c",
			others: map[string]int64{"n1": 100, "n2": 50, "n3": 50}, plannedBy: 3},
		{name: "the job's own earlier start on a node does not hide another's",
			adds: []add{{"b", 10, []string{"n1"}}, {"a", 20, []string{"n1"}}}, job: "b",
			others: map[string]int64{"n1": 20}, jobNodes: []string{"n1"}, plannedBy: 2},
		{name: "a node named twice counts once; a job added again replaces its plan",
			adds: []add{{"a", 10, []string{"n1", "n1", "n2"}}, {"a", 40, []string{"n2"}}}, job: "c",
			others: map[string]int64{"n2": 40}, plannedBy: 1},
		{name: "a dropped job names nothing",
			adds: []add{{"a", 10, []string{"n1"}}, {"b", 20, []string{"n1", "n2"}}}, drop: []string{"a", "x"}, job: "c",
			others: map[string]int64{"n1": 20, "n2": 20}, plannedBy: 1},
		{name: "a job with no nodes is not recorded",
			adds: []add{{"a", 10, nil}}, job: "c", others: map[string]int64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReservations[string, string]()
			for _, a := range tc.adds {
				r.Add(a.job, a.start, a.nodes)
			}
			for _, j := range tc.drop {
				r.Drop(j)
			}
			if got := r.Others(tc.job); !maps.Equal(got, tc.others) {
				t.Errorf("Others(%s) = %v, want %v", tc.job, got, tc.others)
			}
			if got := r.Nodes(tc.job); fmt.Sprint(got) != fmt.Sprint(tc.jobNodes) {
				t.Errorf("Nodes(%s) = %v, want %v", tc.job, got, tc.jobNodes)
			}
			if r.Len() != tc.plannedBy {
				t.Errorf("Len = %d, want %d", r.Len(), tc.plannedBy)
			}
		})
	}
}

func TestTakesReserved(t *testing.T) {
	at := func(starts map[int]float64) func(int) (float64, bool) {
		return func(n int) (float64, bool) { s, ok := starts[n]; return s, ok }
	}
	tests := []struct {
		name  string
		limit float64
		ahead func(int) (float64, bool)
		takes bool // node 0
	}{
		{"nothing reserved", 100, nil, true},
		{"another node reserved", 100, at(map[int]float64{1: 10}), true},
		{"ends exactly at the start", 100, at(map[int]float64{0: 100}), true},
		{"ends a second after it", 101, at(map[int]float64{0: 100}), false},
		{"limit not known", 0, at(map[int]float64{0: 1e9}), false},
	}
	for _, tc := range tests {
		if got := TakesReserved(0, tc.limit, tc.ahead); got != tc.takes {
			t.Errorf("%s: TakesReserved = %v, want %v", tc.name, got, tc.takes)
		}
	}
}

func TestEarliestReserved(t *testing.T) {
	reserved := func(n int) (float64, bool) { s, ok := map[int]float64{1: 300, 2: 200}[n]; return s, ok }
	for _, tc := range []struct {
		base  []Alloc
		start float64
		ok    bool
	}{
		{[]Alloc{{0, 4}}, 0, false},
		{[]Alloc{{0, 4}, {1, 4}}, 300, true},
		{[]Alloc{{1, 4}, {2, 4}}, 200, true},
	} {
		if start, ok := EarliestReserved(tc.base, reserved); start != tc.start || ok != tc.ok {
			t.Errorf("EarliestReserved(%v) = %v, %v; want %v, %v", tc.base, start, ok, tc.start, tc.ok)
		}
	}
	if _, ok := EarliestReserved([]Alloc{{1, 4}}, nil); ok {
		t.Error("EarliestReserved with nothing reserved says a node is")
	}
}

func TestDonorGives(t *testing.T) {
	// 1,000 s left now; each GPU given raises the limit by 250 s.
	raised := func(g int) float64 { return 1000 + 250*float64(g) }
	tests := []struct {
		name  string
		most  int
		start float64
		end   func(int) float64
		want  int
	}{
		{"the most that still ends by the start", 8, 2000, raised, 4},
		{"never more than most", 2, 2000, raised, 2},
		{"none when even one GPU ends later", 8, 1100, raised, 0},
		{"none when it already ends after the start", 8, 900, raised, 0},
		{"none without a raised end", 8, 1e9, nil, 0},
		{"none from a donor with nothing to give", 0, 1e9, raised, 0},
	}
	for _, tc := range tests {
		if got := DonorGives(tc.most, tc.start, tc.end); got != tc.want {
			t.Errorf("%s: DonorGives = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// Shrink-to-admit asks, for queued job "20", which nodes other jobs plan
// to start on and when: a donor there gives only what leaves its raised
// limit ending by then, and job 20 goes there only if it ends by then.
func ExampleReservations() {
	r := NewReservations[string, string]()
	r.Add("15", 1_000_600, []string{"n3"})
	r.Add("20", 1_003_600, []string{"n1"})
	r.Add("30", 1_000_300, []string{"n3", "n4"})
	others := r.Others("20")
	fmt.Println(others["n3"], others["n4"], len(others))
	r.Drop("30") // it started
	fmt.Println(r.Others("20"))
	// Output:
	// 1000300 1000300 2
	// map[n3:1000600]
}
