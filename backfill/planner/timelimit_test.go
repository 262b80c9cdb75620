package planner

import (
	"testing"
	"time"
)

func TestRemainingAtCurrentSize(t *testing.T) {
	const min = time.Minute
	tests := []struct {
		name             string
		left, elapsed    time.Duration
		step, totalSteps int
		want             time.Duration
	}{
		{"without a progress report it is the time left", 40 * min, 20 * min, 0, 0, 40 * min},
		{"a report scales the elapsed time by the steps left: 20·250/150", 40 * min, 20 * min, 150, 400, 20 * min * 250 / 150},
		{"a report never makes it longer than the time left", 10 * min, 20 * min, 150, 400, 10 * min},
		{"a report of step 0 says nothing", 40 * min, 20 * min, 0, 400, 40 * min},
		{"a report past its total says nothing", 40 * min, 20 * min, 500, 400, 40 * min},
		{"a finished job needs nothing more", 40 * min, 20 * min, 400, 400, 0},
		{"a job past its limit needs nothing, not a negative time", -5 * min, 20 * min, 0, 0, 0},
		{"a report before the job ran says nothing", 40 * min, 0, 10, 400, 40 * min},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := RemainingAtCurrentSize(tc.left, tc.elapsed, tc.step, tc.totalSteps); got != tc.want {
				t.Errorf("RemainingAtCurrentSize = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRaisedTimeLimit(t *testing.T) {
	const min = time.Minute
	slurm := TimeLimitRule{Margin: min, MarginFraction: 0.1, Unit: min}
	tests := []struct {
		name                    string
		old, elapsed, remaining time.Duration
		from, to                int
		rule                    TimeLimitRule
		want, wantAtSmall       time.Duration
	}{
		{"half the nodes: twice the remaining work plus 10 %", time.Hour, 0, time.Hour, 2, 1, slurm, 132 * min, 120 * min},
		{"the limit counts from the start: elapsed time is added", time.Hour, 20 * min, 40 * min, 2, 1, slurm, 108 * min, 80 * min},
		{"the safety margin is the least margin", 5 * min, 0, 5 * min, 2, 1, slurm, 11 * min, 10 * min},
		{"the fraction wins over a smaller safety margin", 50 * min, 0, 50 * min, 2, 1, slurm, 110 * min, 100 * min},
		{"rounded up to whole minutes", 30 * min, 0, 30*min + time.Second, 3, 2, slurm, 50 * min, 45*min + 1500*time.Millisecond},
		{"never below the old limit", 10 * time.Hour, 0, 10 * min, 2, 1, slurm, 10 * time.Hour, 20 * min},
		{"without a fraction the margin is the safety margin alone", time.Hour, 0, time.Hour, 2, 1,
			TimeLimitRule{Margin: min, Unit: min}, 121 * min, 120 * min},
		{"without a unit nothing is rounded", time.Second, 0, 10 * time.Second, 3, 2,
			TimeLimitRule{Margin: time.Second}, 16 * time.Second, 15 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, atSmall := RaisedTimeLimit(tc.old, tc.elapsed, tc.remaining, tc.from, tc.to, tc.rule)
			if got != tc.want || atSmall != tc.wantAtSmall {
				t.Errorf("RaisedTimeLimit = %v, %v; want %v, %v", got, atSmall, tc.want, tc.wantAtSmall)
			}
		})
	}
}

// TestARaisedLimitOutlastsALinearJobThatUsesItsWholeLimit is issue 20's
// item 5: a job started on half its nodes (or shrunk to half) whose work
// scales linearly and takes its whole old limit at its old size needs
// twice that at the new size; the raised limit must cover it with room to
// spare (the resize itself, a redone step). Today's start-small doubled a
// 5-minute limit to exactly 10 minutes, so such a job was killed at its
// end.
func TestARaisedLimitOutlastsALinearJobThatUsesItsWholeLimit(t *testing.T) {
	rule := TimeLimitRule{Margin: time.Minute, MarginFraction: 0.1, Unit: time.Minute}
	for _, old := range []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 4 * time.Hour} {
		for from := 2; from <= 8; from++ {
			for to := 1; to < from; to++ {
				limit, _ := RaisedTimeLimit(old, 0, old, from, to, rule)
				linear := old * time.Duration(from) / time.Duration(to)
				if limit < linear+time.Minute || limit < linear+linear/10 {
					t.Errorf("%v on %d nodes, started on %d: limit %v, a linear job needs %v plus a margin", old, from, to, limit, linear)
				}
			}
		}
	}
}
