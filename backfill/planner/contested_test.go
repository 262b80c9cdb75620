package planner

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestPoolsKept(t *testing.T) {
	t4 := FitRule{Types: []string{"t4"}}
	v100 := FitRule{Types: []string{"v100"}}
	anyType := FitRule{}
	job := func(user string, left float64, types ...string) PoolJob {
		return PoolJob{User: user, Types: types, TimeLeft: left}
	}
	for _, c := range []struct {
		name    string
		running []PoolJob
		queued  []FitRule
		user    string // the queued job's owner
		want    []bool
	}{
		{"the longest job of a pool two queued jobs wait for",
			[]PoolJob{job("a", 60000, "t4"), job("b", 3000, "t4")}, []FitRule{t4, t4}, "q", []bool{true, false}},
		{"only the admitted job waits: what it frees goes back",
			[]PoolJob{job("a", 60000, "t4")}, []FitRule{t4}, "q", []bool{false}},
		{"the queued jobs wait for another type",
			[]PoolJob{job("a", 60000, "t4")}, []FitRule{v100, v100}, "q", []bool{false}},
		{"jobs that may use any type contest every pool",
			[]PoolJob{job("a", 60000, "t4"), job("b", 100, "v100")}, []FitRule{anyType, anyType}, "q", []bool{true, true}},
		{"one queued job per type of a job on two types",
			[]PoolJob{job("a", 500, "t4", "v100")}, []FitRule{t4, v100}, "q", []bool{true}},
		{"a longer job on one of its types",
			[]PoolJob{job("a", 500, "t4", "v100"), job("b", 900, "v100")}, []FitRule{anyType, anyType}, "q", []bool{false, true}},
		{"a longer job on another type does not count",
			[]PoolJob{job("a", 500, "t4"), job("b", 900, "v100")}, []FitRule{t4, t4, v100}, "q", []bool{true, false}},
		{"equal time left: both set the makespan",
			[]PoolJob{job("a", 500, "t4"), job("b", 500, "t4")}, []FitRule{t4, anyType}, "q", []bool{true, true}},
		{"a queued job naming two types counts once",
			[]PoolJob{job("a", 500, "t4", "v100")}, []FitRule{{Types: []string{"t4", "v100"}}}, "q", []bool{false}},
		{"a type listed twice",
			[]PoolJob{job("a", 500, "t4", "t4"), job("b", 400, "t4")}, []FitRule{t4, t4}, "q", []bool{true, false}},
		// a placeholder: the queued job's owner runs a longer job on the
		// pool, which must not make alice's look shorter than the longest
		{"a longer job of the queued job's owner does not count",
			[]PoolJob{job("alice", 500, "t4"), job("mallory", 9000, "t4")}, []FitRule{t4, t4}, "mallory", []bool{true, true}},
		{"another user's longer job does",
			[]PoolJob{job("alice", 500, "t4"), job("bob", 9000, "t4")}, []FitRule{t4, t4}, "mallory", []bool{false, true}},
		{"an unknown owner counts",
			[]PoolJob{job("alice", 500, "t4"), job("", 9000, "t4")}, []FitRule{t4, t4}, "mallory", []bool{false, true}},
		{"so do all when the queued job's owner is unknown",
			[]PoolJob{job("alice", 500, "t4"), job("mallory", 9000, "t4")}, []FitRule{t4, t4}, "", []bool{false, true}},
		{"no types", []PoolJob{job("a", 500)}, []FitRule{anyType, anyType}, "q", []bool{false}},
		{"nothing running", nil, []FitRule{t4, t4}, "q", []bool{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := NewPools(c.running, c.queued)
			got := make([]bool, len(c.running))
			for i := range c.running {
				got[i] = p.Kept(i, c.user)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("Kept for a job of %q over %v, %v = %v, want %v", c.user, c.running, c.queued, got, c.want)
			}
		})
	}
	if p := NewPools(nil, nil); p.Kept(-1, "") || p.Kept(3, "") {
		t.Error("Kept of a job out of range is true")
	}
}

// keptNaive is Pools.Kept by its definition, over every job.
func keptNaive(running []PoolJob, queued []FitRule, i int, user string) bool {
	d := running[i]
	types := map[string]bool{}
	for _, t := range d.Types {
		types[t] = true
	}
	n := 0
	for _, r := range queued {
		if r.UsesAny(types) {
			n++
		}
	}
	if len(types) == 0 || n < 2 {
		return false
	}
	for j, o := range running {
		if j != i && o.TimeLeft > d.TimeLeft && sharesType(o.Types, types) && (user == "" || o.User == "" || o.User != user) {
			return false
		}
	}
	return true
}

func sharesType(ts []string, types map[string]bool) bool {
	return slices.ContainsFunc(ts, func(t string) bool { return types[t] })
}

// TestPoolsKeptAgreesWithItsDefinition compares Pools.Kept with keptNaive
// on random pools: few types, owners and time lefts, so that ties, types
// listed twice and jobs of the queued job's owner are common.
func TestPoolsKeptAgreesWithItsDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := []string{"v100", "p100", "t4"}
	users := []string{"", "alice", "bob", "mallory"}
	for round := 0; round < 3000; round++ {
		running := make([]PoolJob, rng.IntN(8))
		for i := range running {
			running[i] = PoolJob{User: users[rng.IntN(len(users))], TimeLeft: float64(rng.IntN(5))}
			for k := rng.IntN(3); k > 0; k-- {
				running[i].Types = append(running[i].Types, types[rng.IntN(len(types))])
			}
		}
		queued := make([]FitRule, rng.IntN(4))
		for i := range queued {
			if rng.IntN(3) > 0 {
				queued[i].Types = []string{types[rng.IntN(len(types))]}
			}
		}
		p := NewPools(running, queued)
		for i := range running {
			for _, u := range users {
				if got, want := p.Kept(i, u), keptNaive(running, queued, i, u); got != want {
					t.Fatalf("Kept(%d, %q) over %+v, %v = %v, want %v", i, u, running, queued, got, want)
				}
			}
		}
	}
}

// TestKeepingFor: each admit.horizon value counts the donors it names as
// kept, and indexes the pools only under "contested".
func TestKeepingFor(t *testing.T) {
	// one 2-GPU v100 pool, contested by two queued v100 jobs; job 0 of bob is
	// its longest
	running := []PoolJob{{User: "bob", Types: []string{"v100"}, TimeLeft: 100}, {User: "carol", Types: []string{"v100"}, TimeLeft: 50}}
	queued := []FitRule{{Types: []string{"v100"}}, {}}
	for _, tc := range []struct {
		horizon   string
		wantPools bool
		none      bool
		kept      []bool // Kept(i, "alice") for i = 0, 1
	}{
		{horizon: HorizonKept, kept: []bool{true, true}},
		{horizon: HorizonReturned, none: true, kept: []bool{false, false}},
		{horizon: "", none: true, kept: []bool{false, false}},
		{horizon: HorizonContested, wantPools: true, kept: []bool{true, false}},
	} {
		t.Run(tc.horizon, func(t *testing.T) {
			called := 0
			k := KeepingFor(tc.horizon, func() *Pools { called++; return NewPools(running, queued) })
			if want := map[bool]int{true: 1, false: 0}[tc.wantPools]; called != want {
				t.Errorf("pools indexed %d times, want %d", called, want)
			}
			if k.None() != tc.none {
				t.Errorf("None() = %v, want %v", k.None(), tc.none)
			}
			for i, want := range tc.kept {
				if got := k.Kept(i, "alice"); got != want {
					t.Errorf("Kept(%d) = %v, want %v", i, got, want)
				}
			}
		})
	}
}
