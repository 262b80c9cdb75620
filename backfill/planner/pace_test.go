package planner

import (
	"slices"
	"testing"
)

// TestPaceTakesTheExtraJobsWhenTheyRunTheJobFaster: 4 V100s plus 4 more
// V100s by extra jobs run a job with 8 logical workers faster than 4, so
// its pace is all 8; 4 V100s plus 4 T4s at a tenth of the speed run it
// slower (every step waits for the slowest GPU), so its pace is the base.
func TestPaceTakesTheExtraJobsWhenTheyRunTheJobFaster(t *testing.T) {
	m := Model{LogicalWorkers: 8, RefGPUs: 4, Gamma: 1}
	base := []SpeedCount{{Speed: 1, N: 4}}
	for _, tc := range []struct {
		name      string
		all, want []SpeedCount
	}{
		{"faster with the extra jobs", []SpeedCount{{Speed: 1, N: 8}}, []SpeedCount{{Speed: 1, N: 8}}},
		{"slower with the extra jobs", []SpeedCount{{Speed: 1, N: 4}, {Speed: 0.1, N: 4}}, base},
		{"no extra jobs", base, base},
	} {
		if got := Pace(m, base, tc.all); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Pace = %v, want %v", tc.name, got, tc.want)
		}
	}
}
