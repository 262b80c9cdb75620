package planner

import "testing"

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
