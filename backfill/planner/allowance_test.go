package planner

import (
	"testing"
	"time"
)

func TestAllowedEnd(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		allowance, startRun, elapsed float64
		want                         float64
	}{
		{"half its run past its run at the start allocation, less what it has run", 0.5, 1000, 200, 1300},
		{"no allowance", 0, 1000, 200, 0},
		{"a negative allowance is none", -1, 1000, 200, 0},
		{"an unknown run is none", 0.5, 0, 200, 0},
		{"a job past its allowed end may end no later than now", 0.5, 1000, 2000, 0},
		{"a negative elapsed (a clock behind slurmctld's) counts as none", 0.5, 1000, -300, 1500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AllowedEnd(tc.allowance, tc.startRun, tc.elapsed); got != tc.want {
				t.Errorf("AllowedEnd(%v, %v, %v) = %v, want %v", tc.allowance, tc.startRun, tc.elapsed, got, tc.want)
			}
		})
	}
}

// TestTheAllowanceLetsTheLongestJobYield: the donor with the most time left
// sets the horizon, so without an allowance it never yields; with one it
// gives what keeps its end, never getting the GPUs back, within it.
func TestTheAllowanceLetsTheLongestJobYield(t *testing.T) {
	c := NewCluster([]Node{{Name: "n0", GPUType: "v100", Total: 4}}, nil)
	// 1,000 s left; lent for the queued job's run each GPU costs 10 s
	// (Loss), never given back 300 s (Kept).
	longest := Donor{Base: []Alloc{{0, 4}}, Min: 1, TimeLeft: 1000, Loss: linearLoss(10), Kept: linearLoss(300)}
	for _, tc := range []struct {
		name    string
		allowed float64
		kept    bool
		want    int // GPUs the queued job gets, 0: not admitted
	}{
		{"no allowance: the horizon, its own end, keeps it whole", 0, true, 0},
		{"an allowance of 1,650 s: two GPUs never given back end it at 1,600 s", 1650, true, 2},
		{"an allowance of 1,200 s holds no GPU never given back", 1200, true, 0},
		{"without Kept the allowance is not used", 1650, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := longest
			d.Allowed = tc.allowed
			if !tc.kept {
				d.Kept = nil
			}
			for want := 1; want <= 3; want++ {
				_, ok := c.Admit(AdmitRequest{Avail: []int{0}, Want: want, Gain: 500, Horizon: 1000, Donors: []Donor{d}})
				if got := ok; got != (want <= tc.want) {
					t.Errorf("Admit of %d GPUs: ok = %v, want %v", want, got, want <= tc.want)
				}
			}
		})
	}
}

// ShrinkLoss need not grow with the GPUs given (logical workers round onto
// the GPUs left: 8 of them on 7 GPUs run as slowly as on 4), so the
// allowance gives only as many GPUs as keep every smaller count within it
// too (helper 106's: a binary search could pass 2 where 1 broke it).
func TestTheAllowanceHoldsForEveryCountUpToWhatIsGiven(t *testing.T) {
	c := NewCluster([]Node{{Name: "n0", GPUType: "v100", Total: 4}}, nil)
	bumpy := func(g int) float64 { return []float64{0, 900, 100, 100, 5000}[g] }
	d := Donor{Base: []Alloc{{0, 4}}, Min: 1, TimeLeft: 1000, Loss: linearLoss(1), Kept: bumpy, Allowed: 1500}
	for want := 1; want <= 3; want++ {
		if _, ok := c.Admit(AdmitRequest{Avail: []int{0}, Want: want, Gain: 500, Horizon: 1000, Donors: []Donor{d}}); ok {
			t.Errorf("admitted %d GPUs: giving 1 would end the donor at 1,900 s, past its allowed 1,500 s", want)
		}
	}
	if got := mostUnder(1000, 3, bumpy, 1500); got != 0 {
		t.Errorf("mostUnder = %d, want 0", got)
	}
	if got := mostUnder(1000, 3, linearLoss(100), 1250); got != 2 {
		t.Errorf("mostUnder of a growing delay = %d, want 2", got)
	}
}

func TestStartRun(t *testing.T) {
	const min = time.Minute
	for _, tc := range []struct {
		name                   string
		limit, raised, elapsed time.Duration
		step, total            int
		want                   float64
	}{
		{"no progress report: the limit before shrink-to-admit raised it", 100 * min, 40 * min, 30 * min, 0, 0, 3600},
		{"its pace so far when that is less (10 min for 100 of 600 steps)", 4 * 60 * min, 0, 10 * min, 100, 600, 3600},
		{"the limit when that is less", 50 * min, 0, 10 * min, 100, 600, 3000},
		{"a raised limit and progress: the lesser of the two", 180 * min, 60 * min, 30 * min, 300, 600, 3600},
		{"a report past its total steps is not read", 100 * min, 0, 10 * min, 700, 600, 6000},
		{"nothing run yet: no pace to read", 100 * min, 0, 0, 5, 600, 6000},
		{"progress alone gives none: the estimate is never above the limit (helper 108's)", 0, 0, 10 * min, 100, 300, 0},
		{"nor with raises above a lowered limit", 10 * min, 20 * min, 10 * min, 100, 300, 0},
		{"neither", 0, 0, 0, 0, 0, 0},
		{"raises above the limit (a store ahead of Slurm) count as no limit", 10 * min, 20 * min, 0, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StartRun(tc.limit, tc.raised, tc.elapsed, tc.step, tc.total); got != tc.want {
				t.Errorf("StartRun(%v, %v, %v, %d, %d) = %v, want %v", tc.limit, tc.raised, tc.elapsed, tc.step, tc.total, got, tc.want)
			}
		})
	}
}
